"""Managed custody: keys whose private half the service holds.

| module        | holds                                                                      |
|---------------|----------------------------------------------------------------------------|
| ``backend``   | the ``KeyCustody`` interface, key binding, seed handling, algorithm policy  |
| ``pkcs11``    | the embedded backend: seeds wrapped by a PKCS#11 token's AES key            |
| ``softhsm``   | SoftHSM2 token set-up (layout, PIN files, ``softhsm2-util``)                |
| ``softhsm_cli`` | ``python -m services.custody.softhsm_cli init DIR`` (``make`` uses it)    |
| ``lifecycle`` | create, sign, schedule/cancel deletion, audit events                       |
| ``billing``   | per-month metering of managed keys and signatures                          |
| ``purge``     | destruction of keys whose waiting period is over                           |
| ``factory``   | the backend and the service the settings name                              |
| ``errors``    | what custody refuses or fails with                                         |

See docs/custody.md.
"""
