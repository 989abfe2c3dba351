"""Text that people choose (e-mail addresses, names, labels, query values): which
characters are refused and the one normal form that is stored.

Refused anywhere: C0 controls (U+0000-U+001F, NUL included), DEL and C1 controls
(U+007F-U+009F), the line and paragraph separators (U+2028, U+2029), the bidirectional
embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) and lone surrogates.
They forge log lines, hide or reorder what a reader sees ("Trojan Source") and never
belong in an address, a name or a label. Everything else is allowed, and stored in
Unicode normalisation form C (NFC), so that one text typed two ways is one value; an
e-mail address is also lower-cased as a whole (``email_form``).
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

#: What the refused characters are, for error messages and documentation.
UNSAFE_DESCRIPTION = (
    "control characters (U+0000-U+001F, U+007F-U+009F), line separators (U+2028, U+2029) "
    "and bidirectional overrides or isolates (U+202A-U+202E, U+2066-U+2069)"
)


def unsafe_character(text: str) -> str | None:
    """The first refused character of ``text`` as ``U+XXXX``, or None when there is none."""
    found = _UNSAFE.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def nfc(text: str) -> str:
    """``text`` in Unicode normalisation form C."""
    return unicodedata.normalize("NFC", text)


def email_form(email: str) -> str:
    """The form an e-mail address is stored and compared in, one account per form: NFC,
    lower-cased as a whole (local part and domain), NFC again (so that the result is NFC
    whatever lower-casing yields). Idempotent; checks nothing (``normalise_email`` does)."""
    return nfc(nfc(email).lower())
