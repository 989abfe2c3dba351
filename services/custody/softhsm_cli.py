"""``python -m services.custody.softhsm_cli init DIR``: create (idempotently) a SoftHSM2
token and its wrapping key under DIR, the same way the server does on first start.
``make`` uses it for the test suite's shared token and for ``make softhsm-token``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from services.custody.errors import CustodyUnavailable
from services.custody.pkcs11 import DEFAULT_TOKEN_LABEL, SOFTHSM_MODULE
from services.custody.softhsm import SoftHsmLayout, open_softhsm


def main(argv: list[str] | None = None) -> int:
    """``init DIR``: print the token's ``softhsm2.conf`` (exit 0), or why it cannot be made (exit 2)."""
    parser = argparse.ArgumentParser(prog="python -m services.custody.softhsm_cli")
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="create a SoftHSM2 token under DIR (idempotent)")
    init.add_argument("directory", type=Path)
    init.add_argument("--label", default=DEFAULT_TOKEN_LABEL)
    init.add_argument("--module", default=SOFTHSM_MODULE)
    args = parser.parse_args(argv)
    conf = SoftHsmLayout(args.directory.absolute()).conf
    try:
        open_softhsm(conf, args.label, module=args.module).close()
    except CustodyUnavailable as exc:
        print(f"softhsm: {exc}", file=sys.stderr)
        return 2
    print(conf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
