"""argon2id password hashing and login timing with the production parameters."""

from __future__ import annotations

import statistics
import time

import pytest

from services.errors import WeakPassword
from services.passwords import Passwords


@pytest.fixture(scope="module")
def passwords() -> Passwords:
    return Passwords()


def test_hashes_are_argon2id_with_rfc9106_parameters(passwords):
    stored = passwords.hash("correct horse battery staple")
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert "correct horse" not in stored
    assert passwords.verify(stored, "correct horse battery staple")
    assert not passwords.verify(stored, "correct horse battery stapler")


def test_unknown_account_costs_the_same_hash_work(passwords):
    # The dummy hash that unknown emails are checked against has the same parameters...
    params = passwords.hash("x" * 12).split("$")[3]
    assert passwords._dummy_hash.split("$")[3] == params
    # ...and so takes about as long as a wrong password for a real account.
    stored = passwords.hash("correct horse battery staple")

    def timed(stored_hash) -> float:
        start = time.perf_counter()
        assert not passwords.verify(stored_hash, "wrong password!!")
        return time.perf_counter() - start

    # Interleaved samples, so load from other processes hits both sides alike.
    unknown, wrong = [], []
    for _ in range(9):
        unknown.append(timed(None))
        wrong.append(timed(stored))
    ratio = statistics.median(unknown) / statistics.median(wrong)
    assert 0.5 < ratio < 2.0, ratio


def test_policy():
    Passwords.check_policy("p" * 12)
    with pytest.raises(WeakPassword, match="at least 12"):
        Passwords.check_policy("p" * 11)
    with pytest.raises(WeakPassword, match="at most 1024"):
        Passwords.check_policy("p" * 1025)


def test_corrupt_stored_hash_is_a_failed_login_not_a_crash(passwords):
    assert not passwords.verify("not-a-hash", "whatever password")
