"""Sanic's HTTP protocol with a total deadline for receiving a request.

Sanic measures ``REQUEST_TIMEOUT`` from the last byte received, so a client trickling a
byte every few seconds keeps a connection (and a worker's memory) forever: the slowloris
attack. Here the deadline runs from a request's first byte until its headers *and* body
are in; a request still arriving after ``REQUEST_TIMEOUT`` seconds is answered
``408 REQ_008``, and the connection is closed ``_ANSWER_GRACE`` seconds later if the client
is still sending (Sanic would otherwise keep reading the rest of the body; the grace lets the
answer go out first on a loaded machine). A handler's own time is bounded by
``RESPONSE_TIMEOUT`` as before.
"""

from __future__ import annotations

from time import monotonic as current_time  # Sanic's clock for its timeouts
from typing import Any

from sanic.exceptions import RequestTimeout
from sanic.http import Stage
from sanic.server.protocols.http_protocol import HttpProtocol

_ANSWER_GRACE = 5.0
"""Seconds between the 408 and closing a connection whose client is still sending."""


class DeadlineHttpProtocol(HttpProtocol):
    """``HttpProtocol`` whose request timeout counts from the request's first byte."""

    __slots__ = ("_request_started", "_timed_out")  # Sanic's protocols use slots

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_started = 0.0
        self._timed_out = False

    def data_received(self, data: bytes) -> None:
        """Note when a new request starts arriving, then let Sanic take the bytes."""
        http = getattr(self, "_http", None)  # set once the connection task has started
        if http is None or http.stage is Stage.IDLE:
            self._request_started = current_time()
            self._timed_out = False
        super().data_received(data)

    def check_timeouts(self) -> None:
        """Time out a request whose headers or body are still arriving after the deadline
        (Sanic's own check would restart the clock at every byte), else Sanic's checks."""
        if self._timed_out:  # answered 408 by now; Sanic would go on reading the body
            self.close()
            return
        http = getattr(self, "_http", None)
        arriving = http is not None and (
            http.stage is Stage.REQUEST or (http.stage is Stage.HANDLER and bool(http.request_body))
        )
        if self._task and arriving and current_time() - self._request_started > self.request_timeout:
            assert http is not None
            self._timed_out = True
            http.exception = RequestTimeout("request not received within the deadline")
            self._task.cancel("request deadline")  # Sanic answers with http.exception
            self._callback_check_timeouts = self.loop.call_later(_ANSWER_GRACE, self.check_timeouts)
            return
        super().check_timeouts()
