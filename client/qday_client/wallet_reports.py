"""Wallet scans and migration plans on this machine: the descriptor read from an argument or
a file, a descriptor scan's report, and a plan's directory of files.

A plan directory holds ``plan.json`` (the API's ``data``), ``plan.csv`` (one row per payment)
and one ``step-<order>.psbt`` per step: the binary BIP-174 PSBT (it starts ``psbt\\xff``), the
file Bitcoin Core, Sparrow and hardware-wallet companions import. The files are owner-only:
they name the wallet's addresses, coins and key paths.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from qday_client import output
from qday_client.errors import LocalError, ServerError
from qday_client.models import DescriptorScan, MigrationPlan, PlanStep
from qday_client.private_files import write_private

#: Columns of a descriptor scan's CSV report (one row per used address) and of its coins CSV.
ADDRESS_COLUMNS = (
    "address",
    "chain",
    "branch",
    "index",
    "scriptType",
    "balanceSat",
    "balance",
    "txCount",
    "publicKeyExposed",
    "exposure",
    "riskScore",
    "riskValue",
)
COIN_COLUMNS = ("txid", "vout", "value", "address", "height", "publicKeyExposed", "exposure")
#: Columns of ``plan.csv`` (one row per payment) and of the table of steps printed.
PLAN_COLUMNS = ("order", "address", "valueSat", "index", "feeSat", "vsize")
STEP_COLUMNS = ("order", "exposure", "inputs", "inSat", "outputs", "outSat", "feeSat", "vsize", "file")
PSBT_MAGIC = b"psbt\xff"
_PLAN_FILE = re.compile(r"plan\.(json|csv)|step-\d+\.psbt")


def read_wallet_text(value: str, option: str) -> str:
    """The text given to ``option``: ``value`` itself or, for ``@path``, that file's contents
    (so a descriptor need not sit in the shell's history); surrounding blanks removed."""
    if not value.startswith("@"):
        return value.strip()
    path = Path(value[1:])
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise LocalError(f"cannot read {option} file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LocalError(f"{option} file {path} is not UTF-8 text") from None
    if not text:
        raise LocalError(f"{option} file {path} is empty")
    return text


def scan_report(scan: DescriptorScan, fmt: str) -> str:
    """A descriptor scan's report: ``json`` the whole answer (the API's ``data``), ``csv`` one
    row per used address (``ADDRESS_COLUMNS``)."""
    if fmt == "json":
        return json.dumps(output.to_plain(scan), indent=2) + "\n"
    return output.csv_text(output.to_plain(scan.addresses), ADDRESS_COLUMNS)


def coins_csv(scan: DescriptorScan) -> str:
    """The wallet's unspent coins as CSV, one row per coin (``COIN_COLUMNS``)."""
    return output.csv_text(output.to_plain(scan.coins), COIN_COLUMNS)


def scan_summary(scan: DescriptorScan) -> str:
    """One line on a descriptor scan: balances, used and derived addresses, lookup rounds."""
    s = scan.summary
    if s.balance_sat is None:  # EVM accounts: coins of several chains, added up in USD only
        usd = "unknown" if s.balance_at_risk_usd is None else f"${s.balance_at_risk_usd:,.2f}"
        balances = f"balance at risk {usd}"
    else:
        balances = f"balance {s.balance_sat} sat, exposed {s.exposed_balance_sat} sat"
    return (
        f"{balances}; {s.used_addresses} used of {s.derived_addresses} derived addresses in "
        f"{s.lookup_rounds} lookup rounds"
    )


def step_file(step: PlanStep) -> str:
    """The name of a step's PSBT file in the plan directory."""
    return f"step-{step.order}.psbt"


def step_rows(plan: MigrationPlan) -> list[dict[str, object]]:
    """The plan's steps summed up for a table (``STEP_COLUMNS``)."""
    return [
        {
            "order": s.order,
            "exposure": ",".join(sorted({i.exposure for i in s.inputs})),
            "inputs": len(s.inputs),
            "inSat": sum(i.value_sat for i in s.inputs),
            "outputs": len(s.outputs),
            "outSat": sum(o.value_sat for o in s.outputs),
            "feeSat": s.fee_sat,
            "vsize": s.vsize,
            "file": step_file(s),
        }
        for s in plan.steps
    ]


def plan_csv(plan: MigrationPlan) -> str:
    """``plan.csv``: one row per payment of every step (``PLAN_COLUMNS``)."""
    rows = [
        {
            "order": s.order,
            "address": o.address,
            "valueSat": o.value_sat,
            "index": o.index,
            "feeSat": s.fee_sat,
            "vsize": s.vsize,
        }
        for s in plan.steps
        for o in s.outputs
    ]
    return output.csv_text(rows, PLAN_COLUMNS)


def plan_summary(plan: MigrationPlan, directory: Path) -> str:
    """One line on a plan: its steps, totals, fee rate, skipped coins and where its files are."""
    t = plan.totals
    return (
        f"{len(plan.steps)} steps: {t.in_sat} sat in, {t.out_sat} sat to the destination, {t.fee_sat} sat in fees "
        f"at {plan.fee_rate} sat/vB; {len(plan.skipped)} coins skipped; files in {directory}"
    )


def existing_plan_files(directory: Path) -> list[Path]:
    """The plan files (``plan.json``, ``plan.csv``, ``step-*.psbt``) already in ``directory``."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _PLAN_FILE.fullmatch(p.name))


def check_plan_dir(directory: Path, *, force: bool) -> None:
    """``LocalError`` unless a plan may be written to ``directory``: it is a directory or does not
    exist, and holds no plan files, or ``force`` replaces them."""
    if directory.exists() and not directory.is_dir():
        raise LocalError(f"{directory} is not a directory")
    found = existing_plan_files(directory)
    if found and not force:
        names = ", ".join(p.name for p in found)
        raise LocalError(f"{directory} already holds a plan ({names}); pass --force to replace it")


def psbt_bytes(step: PlanStep) -> bytes:
    """The binary PSBT of a step (its base64 decoded); ``ServerError`` when it is not one."""
    try:
        raw = base64.b64decode(step.psbt, validate=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        raw = b""
    if not raw.startswith(PSBT_MAGIC):
        raise ServerError("SRV_001", f"step {step.order} of the plan has no base64 BIP-174 PSBT")
    return raw


def write_plan(plan: MigrationPlan, directory: Path, *, force: bool) -> None:
    """Write the plan's files to ``directory`` (made if missing); an existing file is an error
    unless ``force``, which also removes the step files of an older, longer plan."""
    psbts = {directory / step_file(s): psbt_bytes(s) for s in plan.steps}  # all checked before any is written
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalError(f"cannot create {directory}: {exc.strerror}") from None
    stale = [p for p in existing_plan_files(directory) if p.suffix == ".psbt" and p not in psbts]
    for path, data in psbts.items():
        write_private(path, data, overwrite=force)
    write_private(directory / "plan.csv", plan_csv(plan).encode(), overwrite=force)
    plain = json.dumps(output.to_plain(plan), indent=2) + "\n"
    write_private(directory / "plan.json", plain.encode(), overwrite=force)
    for path in stale:
        path.unlink()
