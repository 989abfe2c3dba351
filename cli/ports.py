"""Listen ports checked before anything starts.

``qday serve`` and ``qday up`` try each port they will listen on (a bind with
``SO_REUSEADDR``, as the servers do, released at once), so a port another program holds
stops start-up in well under a second with one line naming the port and what changes it,
instead of a server's traceback (and, under ``qday up``, a round of restarts).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Port:
    """A port a program of ours will listen on, and how the user picks another one."""

    what: str
    host: str
    port: int
    hint: str


def problem(port: Port) -> str | None:
    """Why ``port`` cannot be listened on now (None: it can)."""
    try:
        infos = socket.getaddrinfo(port.host, port.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"cannot listen on {port.host}:{port.port} ({port.what}): {exc.strerror or exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port.port} ({port.what}) is in use: {port.hint}"
            return f"cannot listen on {port.host}:{port.port} ({port.what}): {exc.strerror or exc}: {port.hint}"
    return None


def busy(ports: Iterable[Port]) -> str | None:
    """One line naming every port of ``ports`` that cannot be listened on (None: all free)."""
    found = [message for port in ports if (message := problem(port)) is not None]
    return "; ".join(found) or None
