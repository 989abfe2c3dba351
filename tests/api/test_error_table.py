"""Every domain error the code can raise is answered with a documented code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import chains
import chains.errors
import pqc
import services
import storage
import storage.errors
from api.errors import DOMAIN_ERRORS, ERROR_CODES, code_for, code_of
from core.errors import DomainError


def _domain_error_classes() -> set[type[DomainError]]:
    found: set[type[DomainError]] = set()
    for package in (pqc, chains, storage, services):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, DomainError) and obj is not DomainError and obj.__module__ == module.__name__:
                    found.add(obj)
    return found


def test_every_domain_error_class_has_a_documented_code():
    classes = _domain_error_classes()
    assert len(classes) >= 30  # the walk found them (pqc, chains, storage, services, custody)
    # The families' bases are never raised themselves (their subclasses say what happened).
    bases = {chains.errors.ChainError, pqc.PqcError}
    unmapped = sorted(c.__qualname__ for c in classes - bases if code_for(c) == "SRV_001")
    assert unmapped == []
    assert set(DOMAIN_ERRORS.values()) <= set(ERROR_CODES)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (pqc.MalformedSignature("x"), "PQC_002"),  # a subclass overrides its base
        (pqc.InvalidSignature("x"), "PQC_004"),
        (chains.errors.MalformedChainData("x"), "SCAN_004"),  # inherits its base's code
        (storage.errors.StoreUnavailable("x"), "SRV_002"),
        (DomainError("x"), "SRV_001"),  # unmapped: an internal error, never a guess
    ],
)
def test_lookup_walks_the_class_hierarchy(error, code):
    assert code_of(error) == code


def test_details_drop_absent_values():
    assert DomainError("m", field="f", reason=None).details == {"field": "f"}
