"""The custody backend and the managed-custody service the settings name."""

from __future__ import annotations

import logging
from concurrent.futures import Executor

from core.clock import Clock
from services.custody.backend import KeyCustody
from services.custody.errors import CustodyUnavailable
from services.custody.lifecycle import ManagedCustodyService
from services.custody.pkcs11 import Pkcs11WrappedSeedCustody
from services.custody.softhsm import open_softhsm, resolve_softhsm_conf
from services.settings import Settings
from storage.repository import ManagedKeyStore

log = logging.getLogger("qday.custody")


def open_custody_backend(settings: Settings) -> KeyCustody:
    """The custody backend the settings name; raises ``CustodyUnavailable``."""
    if settings.custody_backend == "disabled":
        raise CustodyUnavailable("managed custody is disabled (custody_backend = disabled)")
    if settings.custody_backend == "softhsm":
        conf = resolve_softhsm_conf(settings.softhsm_conf, settings.data_dir)
        return open_softhsm(
            conf,
            settings.custody_token_label,
            settings.custody_pin,
            settings.custody_wrap_key_label,
            settings.custody_module,
        )
    return Pkcs11WrappedSeedCustody(
        settings.custody_module, settings.custody_token_label, settings.custody_pin, settings.custody_wrap_key_label
    )


def open_managed_custody(
    settings: Settings, store: ManagedKeyStore, clock: Clock, executor: Executor | None
) -> ManagedCustodyService:
    """The service for a server: the configured backend, or none (CUS_004 on use)
    when it cannot be opened, so the rest of the API still starts."""
    custody: KeyCustody | None = None
    reason = ""
    try:
        custody = open_custody_backend(settings)
        log.info("managed custody: %s", custody.describe())
    except Exception as exc:  # noqa: BLE001 - the rest of the API must still start
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("managed custody unavailable (%s); managed-custody calls answer CUS_004", reason)
    return ManagedCustodyService(store, custody, clock, executor, settings.deletion_wait_days, reason)
