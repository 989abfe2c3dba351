"""``watch_entry``: the one rule the API and ``qday watch import`` share for labels."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chains.environment import Environment
from services.errors import InvalidRequest
from services.scans import watch_entry

ADDRESS = "0x" + "ab" * 20
AT = datetime(2026, 11, 25, tzinfo=UTC)


@pytest.mark.parametrize("label", ["cold\u202ewallet", "a\x00b", "line\u2028break"])
def test_labels_with_control_or_bidi_characters_are_refused(label: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        watch_entry("acc_1", Environment.LIVE, ADDRESS, None, label, AT)
    assert refused.value.details["field"] == "label"


def test_labels_are_stored_in_nfc() -> None:
    entry = watch_entry("acc_1", Environment.LIVE, ADDRESS, None, "cafe\u0301", AT)
    assert entry.label == "caf\u00e9"
