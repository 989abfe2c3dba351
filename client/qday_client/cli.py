"""The ``qday-client`` command (also ``qday client …``).

Key generation and signing happen on this machine; only public keys and
signatures are sent. Passwords come from ``QDAY_PASSWORD`` /
``QDAY_KEYSTORE_PASSWORD`` or a prompt, never from an argument.

Exit status: 0 success; 1 the API answered with an error (its code is printed);
2 a local problem (usage, key file, keystore, unreachable server); 3 a bulk
scan finished but some rows failed; 4 ``verify`` ran and the attestation is
not valid.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

import pqc
from qday_client import bulk, hybrid, keyfile, output, wallet_reports
from qday_client.client import QdayClient
from qday_client.config import Config, load_config, save_profile
from qday_client.ecdsa_signer import load_signer
from qday_client.errors import ApiError, ConnectionFailed, LocalError, QdayError

EXIT_API_ERROR, EXIT_LOCAL_ERROR, EXIT_PARTIAL, EXIT_INVALID = 1, 2, 3, 4
#: Bulk runs wait out the rate limit this many times per address before giving up on it.
BULK_MAX_RETRIES = 20
KEY_COLUMNS = ("id", "name", "type", "environment", "prefix", "createdAt", "lastUsedAt", "expiresAt")
SCAN_COLUMNS = (
    "address",
    "chain",
    "riskScore",
    "riskLabel",
    "riskValue",
    "publicKeyExposed",
    "balanceAtRisk",
    "balanceAtRiskUsd",
    "chainGrade",
    "chainGradeLabel",
    "cached",
    "scannedAt",
    "dataAsOf",
    "exposureComplete",
)
KEY_SCAN_COLUMNS = (
    "publicKey",
    "keyType",
    "riskScore",
    "riskValue",
    "publicKeyExposed",
    "balanceAtRiskUsd",
    "exposureComplete",
    "cached",
    "scannedAt",
)


def _secret(variable: str, prompt: str) -> str:
    value = os.environ.get(variable)
    if value:
        return value
    if not sys.stdin.isatty():
        raise LocalError(f"set {variable} or run in a terminal to be asked for the {prompt.lower()}")
    return getpass.getpass(f"{prompt}: ")


def _client(config: Config, **options: Any) -> QdayClient:
    return QdayClient(config.api_key, config.api_url, **options)


def _need_key(config: Config) -> None:
    if not config.api_key:
        raise LocalError("no API key: set QDAY_API_KEY, or save one with `qday-client keys create --email … --save`")


async def _management_token(client: QdayClient, args: argparse.Namespace, config: Config) -> str | None:
    """A session token when ``--email`` is given (login), else None (the configured secret key is used)."""
    if args.email:
        login = await client.login(args.email, _secret("QDAY_PASSWORD", "Password"))
        return login.token
    _need_key(config)
    return None


async def cmd_account_register(args: argparse.Namespace, config: Config) -> int:
    """Create an account."""
    async with _client(config) as client:
        account = await client.register_account(args.email, _secret("QDAY_PASSWORD", "Password"), args.name)
    output.show(account, as_json=args.json)
    return 0


async def cmd_keys_create(args: argparse.Namespace, config: Config) -> int:
    """Create an API key; ``--save`` stores it in the profile file for later commands."""
    async with _client(config) as client:
        token = await _management_token(client, args, config)
        created = await client.create_api_key(args.name, args.type, args.environment, token=token)
    if args.save:
        path = save_profile(config.profile, config.api_url, created.key)
        print(f"saved the key in profile {config.profile!r} of {path}", file=sys.stderr)
    output.show(created, as_json=args.json)
    return 0


async def cmd_keys_list(args: argparse.Namespace, config: Config) -> int:
    """List API keys."""
    async with _client(config) as client:
        keys = await client.list_api_keys(token=await _management_token(client, args, config))
    output.show(keys, as_json=args.json, columns=KEY_COLUMNS)
    return 0


async def cmd_keys_delete(args: argparse.Namespace, config: Config) -> int:
    """Revoke an API key."""
    async with _client(config) as client:
        await client.delete_api_key(args.key_id, token=await _management_token(client, args, config))
    output.show({"id": args.key_id, "deleted": True}, as_json=args.json)
    return 0


async def cmd_keys_rotate(args: argparse.Namespace, config: Config) -> int:
    """Rotate an API key (the old one keeps working for 24 h)."""
    async with _client(config) as client:
        rotated = await client.rotate_api_key(args.key_id, token=await _management_token(client, args, config))
    if args.save:
        save_profile(config.profile, config.api_url, rotated.key)
    output.show(rotated, as_json=args.json)
    return 0


async def cmd_keygen(args: argparse.Namespace, config: Config) -> int:
    """Generate a post-quantum key pair here and save it owner-only; no request is made."""
    keypair = keyfile.generate(args.algorithm)
    keyfile.save(keypair, args.out, overwrite=args.force)
    output.show(
        {
            "algorithm": keypair.algorithm.value,
            "file": str(args.out),
            "fingerprint": pqc.public_key_fingerprint(keypair.public_key),
            "publicKey": keypair.public_key.hex(),
        },
        as_json=args.json,
        columns=None if args.json else ("algorithm", "file", "fingerprint"),
    )
    return 0


async def cmd_register(args: argparse.Namespace, config: Config) -> int:
    """Register a local key file's public key with proof of possession."""
    _need_key(config)
    keypair = keyfile.load(args.key_file)
    async with _client(config) as client:
        registered = await hybrid.register_key(client, keypair, args.chain)
    output.show(
        registered,
        as_json=args.json,
        columns=None if args.json else ("id", "algorithm", "chain", "fingerprint", "origin", "createdAt"),
    )
    return 0


def _message(args: argparse.Namespace) -> bytes | None:
    if args.message is not None:
        return args.message.encode()
    if args.message_hex is not None:
        try:
            return bytes.fromhex(args.message_hex.removeprefix("0x"))
        except ValueError:
            raise LocalError("--message-hex is not hex") from None
    return None


async def cmd_attest(args: argparse.Namespace, config: Config) -> int:
    """Sign with both keys here and submit a hybrid attestation (strict unless a message is given)."""
    _need_key(config)
    keypair = keyfile.load(args.pq_key)
    signer = load_signer(args.ecdsa_key, lambda: _secret("QDAY_KEYSTORE_PASSWORD", "Keystore password"))
    try:
        context = bytes.fromhex(args.context.removeprefix("0x"))
        metadata = json.loads(args.metadata) if args.metadata else None
    except ValueError:
        raise LocalError("--context must be hex and --metadata a JSON object") from None
    async with _client(config) as client:
        attestation = await hybrid.attest(
            client,
            signer,
            keypair,
            chain=args.chain,
            scheme=args.scheme,
            message=_message(args),
            context=context,
            metadata=metadata,
        )
    if args.out:
        args.out.write_text(json.dumps(output.to_plain(attestation), indent=2) + "\n")
    output.show(
        attestation,
        as_json=args.json,
        columns=None
        if args.json
        else ("id", "status", "chain", "algorithm", "ecdsaScheme", "strict", "ecdsaPublicKey", "createdAt"),
    )
    return 0


def _attestation_id(reference: str) -> str:
    path = Path(reference)
    if not path.is_file():
        return reference
    try:
        return str(json.loads(path.read_text())["id"])
    except (ValueError, KeyError, TypeError):
        raise LocalError(f"{path} is not an attestation written by `attest --out`") from None


async def cmd_verify(args: argparse.Namespace, config: Config) -> int:
    """Re-verify a stored attestation (by id or the file ``attest --out`` wrote)."""
    _need_key(config)
    async with _client(config) as client:
        result = await client.verify_attestation(_attestation_id(args.attestation))
    output.show(result, as_json=args.json)
    return 0 if result.valid else EXIT_INVALID


def _report_format(args: argparse.Namespace) -> str:
    """``json`` with ``--json``, else ``--format``, else by ``--report``'s suffix (``csv`` unless ``.json``)."""
    by_suffix = "json" if args.report is not None and args.report.suffix == ".json" else "csv"
    return "json" if args.json else args.format or by_suffix


def _write_report(args: argparse.Namespace, report: str) -> str:
    """Write ``report`` to ``--report`` (else stdout); what the summary line adds: ``; report: FILE`` or nothing."""
    if args.report:
        args.report.write_text(report)
        return f"; report: {args.report}"
    sys.stdout.write(report)
    return ""


async def _scan_file(args: argparse.Namespace, config: Config) -> int:
    targets = [
        t if t.chain or not args.chain else bulk.ScanTarget(t.line, t.address, args.chain)
        for t in bulk.read_targets(args.file)
    ]
    progress = bulk.Progress(len(targets)) if args.progress or sys.stderr.isatty() else None
    async with _client(config, max_retries=BULK_MAX_RETRIES) as client:
        rows = await bulk.scan_all(
            client, targets, refresh=args.refresh, concurrency=args.concurrency, on_progress=progress
        )
    written = _write_report(args, bulk.render_report(rows, _report_format(args)))
    failed = sum(row.result is None for row in rows)
    print(f"{len(rows) - failed} scanned, {failed} failed{written}", file=sys.stderr)
    return EXIT_PARTIAL if failed else 0


async def _scan_descriptor(args: argparse.Namespace, config: Config) -> int:
    descriptor = wallet_reports.read_wallet_text(args.descriptor, "--descriptor")
    _need_key(config)
    async with _client(config) as client:
        scan = await client.scan_descriptor(descriptor, args.chain or "bitcoin", args.gap_limit)
    written = _write_report(args, wallet_reports.scan_report(scan, _report_format(args)))
    if args.coins_csv:
        args.coins_csv.write_text(wallet_reports.coins_csv(scan))
        written += f"; coins: {args.coins_csv}"
    print(wallet_reports.scan_summary(scan) + written, file=sys.stderr)
    return 0


async def cmd_scan(args: argparse.Namespace, config: Config) -> int:
    """Scan one address, every address of ``--file`` (rows without a chain get ``--chain``) with a report,
    or a whole wallet from ``--descriptor`` with a report of its used addresses."""
    if args.descriptor is not None:
        return await _scan_descriptor(args, config)
    _need_key(config)
    if args.file is not None:
        return await _scan_file(args, config)
    async with _client(config) as client:
        result = await client.scan_wallet(args.address, args.chain, args.refresh)
    output.show(result, as_json=args.json, columns=None if args.json else SCAN_COLUMNS)
    return 0


async def cmd_scan_key(args: argparse.Namespace, config: Config) -> int:
    """Scan every address and output of one public key; the addresses follow as a table."""
    _need_key(config)
    async with _client(config) as client:
        result = await client.scan_key(args.public_key, args.chain or None, args.refresh)
    if args.json:
        output.show(result, as_json=True)
        return 0
    output.show(result, as_json=False, columns=KEY_SCAN_COLUMNS)
    rows = [
        {
            "chain": a.chain,
            "form": a.form,
            "address": a.address,
            "riskScore": a.scan.risk_score if a.scan else None,
            "exposed": a.scan.public_key_exposed if a.scan else None,
            "error": a.error.message if a.error else None,
        }
        for a in result.addresses
        if a.active or a.error
    ]
    output.show(rows, as_json=False, columns=("chain", "form", "address", "riskScore", "exposed", "error"))
    return 0


async def cmd_plan(args: argparse.Namespace, config: Config) -> int:
    """Plan moving a wallet's coins to a new wallet: ``plan.json``, ``plan.csv`` and one binary PSBT per
    step in ``--out-dir`` (an older plan there is replaced only with ``--force``); the steps as a table."""
    descriptor = wallet_reports.read_wallet_text(args.descriptor, "--descriptor")
    destination = wallet_reports.read_wallet_text(args.destination, "--destination")
    _need_key(config)
    wallet_reports.check_plan_dir(args.out_dir, force=args.force)
    async with _client(config) as client:
        plan = await client.plan_migration(
            descriptor, destination, args.fee_rate, args.max_per_address_sat, args.gap_limit
        )
    wallet_reports.write_plan(plan, args.out_dir, force=args.force)
    if args.json:
        output.show(plan, as_json=True)
    else:
        output.show(wallet_reports.step_rows(plan), as_json=False, columns=wallet_reports.STEP_COLUMNS)
    print(wallet_reports.plan_summary(plan, args.out_dir), file=sys.stderr)
    return 0


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON (the API's field names) instead of tables")
    common.add_argument("--profile", help="profile of the profile file (default QDAY_PROFILE or 'default')")
    common.add_argument("--api-url", help="API base URL (default QDAY_API_URL, the profile, http://127.0.0.1:8000)")
    return common


def _add_key_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    keys = sub.add_parser("keys", help="manage API keys (create, list, delete, rotate)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    login = argparse.ArgumentParser(add_help=False)
    login.add_argument(
        "--email",
        help="log in as this account (password from QDAY_PASSWORD or a prompt) "
        "instead of using the configured secret key",
    )
    create = keys_sub.add_parser("create", parents=[common, login], help="create an API key")
    create.add_argument("--name", default="qday-client")
    create.add_argument("--type", choices=("secret", "publishable"), default="secret")
    create.add_argument("--environment", choices=("test", "live"), default="test")
    create.add_argument("--save", action="store_true", help="store the new key in the profile file (0600)")
    create.set_defaults(func=cmd_keys_create)
    keys_sub.add_parser("list", parents=[common, login], help="list API keys").set_defaults(func=cmd_keys_list)
    delete = keys_sub.add_parser("delete", parents=[common, login], help="revoke an API key now")
    delete.add_argument("key_id")
    delete.set_defaults(func=cmd_keys_delete)
    rotate = keys_sub.add_parser("rotate", parents=[common, login], help="replace an API key (24 h overlap)")
    rotate.add_argument("key_id")
    rotate.add_argument("--save", action="store_true", help="store the replacement in the profile file")
    rotate.set_defaults(func=cmd_keys_rotate)


def _add_signing_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    keygen = sub.add_parser("keygen", parents=[common], help="generate a post-quantum key pair locally")
    keygen.add_argument(
        "--algorithm",
        default="ml-dsa-65",
        help="ml-dsa-44, ml-dsa-65 (default), ml-dsa-87, slh-dsa-128s, slh-dsa-shake-128s",
    )
    keygen.add_argument("--out", type=Path, required=True, help="key file to create (mode 0600)")
    keygen.add_argument("--force", action="store_true", help="overwrite an existing file")
    keygen.set_defaults(func=cmd_keygen)

    register = sub.add_parser("register", parents=[common], help="register a local key (proof of possession)")
    register.add_argument("key_file", type=Path)
    register.add_argument("--chain", default="ethereum")
    register.set_defaults(func=cmd_register)

    attest = sub.add_parser("attest", parents=[common], help="sign with both keys and submit a hybrid attestation")
    attest.add_argument("--ecdsa-key", required=True, help="secp256k1 key: keystore/raw/hex file, env:VARIABLE, or hex")
    attest.add_argument("--pq-key", type=Path, required=True, help="key file from `keygen`")
    attest.add_argument("--chain", default="ethereum")
    attest.add_argument("--scheme", choices=("eip191", "bip137", "digest"), help="ECDSA message scheme")
    message = attest.add_mutually_exclusive_group()
    message.add_argument("--message", help="sign this text instead of a strict-mode statement")
    message.add_argument("--message-hex", help="sign these bytes (hex) instead of a strict-mode statement")
    attest.add_argument("--context", default="", help="FIPS 204 context string, hex (default empty)")
    attest.add_argument("--metadata", help="JSON object stored with the attestation")
    attest.add_argument("--out", type=Path, help="also write the attestation (JSON) to this file")
    attest.set_defaults(func=cmd_attest)

    verify = sub.add_parser("verify", parents=[common], help="re-verify a stored attestation")
    verify.add_argument("attestation", help="attestation id, or the file written by `attest --out`")
    verify.set_defaults(func=cmd_verify)


def _add_scan_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    wallet_help = "a descriptor or extended public key, or @FILE holding one (private keys are refused here)"
    scan = sub.add_parser(
        "scan", parents=[common], help="quantum-risk scan of one address, a CSV file of them, or a wallet"
    )
    target = scan.add_mutually_exclusive_group(required=True)
    target.add_argument("address", nargs="?")
    target.add_argument("--file", type=Path, help="CSV of address[,chain] lines (bulk scan)")
    target.add_argument("--descriptor", help=f"scan a whole Bitcoin wallet: {wallet_help}")
    scan.add_argument(
        "--chain", help="chain of ADDRESS, or of file rows that name none (default: detected; bitcoin for a wallet)"
    )
    scan.add_argument("--refresh", action="store_true", help="fetch fresh chain data")
    scan.add_argument("--report", "--output", type=Path, help="bulk, wallet: write the report here (default stdout)")
    scan.add_argument(
        "--format", choices=("csv", "json"), help="bulk, wallet: report format (default from --report's suffix)"
    )
    scan.add_argument("--concurrency", type=int, default=4, help="bulk: scans in flight (default 4)")
    scan.add_argument("--progress", action="store_true", help="bulk: progress bar even when stderr is not a terminal")
    scan.add_argument("--gap-limit", type=int, default=20, help="wallet: unused addresses in a row that end a branch")
    scan.add_argument("--coins-csv", type=Path, help="wallet: also write its unspent coins to this CSV file")
    scan.set_defaults(func=cmd_scan)

    scan_key = sub.add_parser("scan-key", parents=[common], help="quantum-risk scan of a public key on every chain")
    scan_key.add_argument("public_key", help="hex: 33- or 65-byte secp256k1 SEC, or 32-byte ed25519")
    scan_key.add_argument("--chain", action="append", help="limit to this chain (repeatable; default all)")
    scan_key.add_argument("--refresh", action="store_true", help="fetch fresh chain data")
    scan_key.set_defaults(func=cmd_scan_key)

    plan = sub.add_parser(
        "plan", parents=[common], help="plan moving a Bitcoin wallet to a new one, as unsigned PSBT files"
    )
    plan.add_argument("--descriptor", required=True, help=f"the wallet to move: {wallet_help}")
    plan.add_argument("--destination", required=True, help="the new wallet: one ranged descriptor (or ypub/zpub)")
    plan.add_argument("--fee-rate", type=float, help="sat/vB (default: the server's estimate for 6 blocks)")
    plan.add_argument("--max-per-address-sat", type=int, help="most any one new address receives (default 50 BTC)")
    plan.add_argument("--gap-limit", type=int, default=20, help="unused addresses in a row that end a branch")
    plan.add_argument(
        "--out-dir", type=Path, required=True, help="write plan.json, plan.csv and step-N.psbt (binary) here"
    )
    plan.add_argument("--force", action="store_true", help="replace a plan already in --out-dir")
    plan.set_defaults(func=cmd_plan)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``qday-client``."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="qday-client",
        description=__doc__.split("\n\n")[0],
        epilog="Options such as --json go after the subcommand.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    account = sub.add_parser("account", help="accounts")
    account_sub = account.add_subparsers(dest="account_command", required=True)
    register = account_sub.add_parser(
        "register", parents=[common], help="create an account (password from QDAY_PASSWORD or a prompt)"
    )
    register.add_argument("--email", required=True)
    register.add_argument("--name")
    register.set_defaults(func=cmd_account_register)
    _add_key_commands(sub, common)
    _add_signing_commands(sub, common)
    _add_scan_commands(sub, common)
    return parser


def _report(error: QdayError) -> int:
    where = []
    if error.status is not None:
        where.append(f"HTTP {error.status}")
    if error.request_id:
        where.append(f"request {error.request_id}")
    suffix = f" ({', '.join(where)})" if where else ""
    if isinstance(error, ConnectionFailed):
        suffix += "; is the server running there? --api-url or QDAY_API_URL names it"
    print(f"qday-client: {error.code}: {error.message}{suffix}", file=sys.stderr)
    return EXIT_API_ERROR if isinstance(error, ApiError) else EXIT_LOCAL_ERROR


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``qday-client`` console script (and of ``qday client``)."""
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.profile)
        if args.api_url:
            config = Config(args.api_url, config.api_key, config.profile)
        return asyncio.run(args.func(args, config))
    except QdayError as error:
        return _report(error)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
