"""The one base of every error the domain raises.

Domain code (``pqc``, ``chains``, ``storage``, ``services``) raises subclasses of
``DomainError`` that say *what* went wrong; it never names an HTTP status or an
error code. The API maps each class to the spec's code and status in one table
(``api/errors.py``), the CLI prints the message. Messages and details never
contain key material, only lengths, field names and reasons.
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal or failure the caller can act on: a readable ``message`` and small,
    JSON-safe ``details`` (field names, reasons, limits) for the error envelope."""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, object] = {k: v for k, v in details.items() if v is not None}
