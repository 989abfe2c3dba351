"""``qday watch import`` within the account's plan cap (issue 15): rows of new addresses
beyond the cap are rejected by line (LIM_001), the rest imported, already watched rows
never count; the enterprise cap is ``QDAY_ENTERPRISE_WATCH_CAP``."""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.environment import Environment
from cli.main import main
from storage.models import Plan
from storage.sql_accounts import SqlStore
from tests.pipelines.support import DataDir, evm_address


def _import(data_dir: DataDir, source: Path, environment: str = "live") -> int:
    return main(
        [
            "watch",
            "import",
            str(source),
            "--account",
            "ops@example.com",
            "--environment",
            environment,
            "--data-dir",
            str(data_dir.root),
        ]
    )


def _count(data_dir: DataDir, account_id: str) -> int:
    conn = data_dir.connect()
    try:
        return conn.execute("SELECT COUNT(*) FROM watchlist WHERE account_id = ?", (account_id,)).fetchone()[0]
    finally:
        conn.close()


def test_rows_beyond_the_free_cap_are_rejected_by_line(data_dir: DataDir, tmp_path: Path, capsys) -> None:
    account = data_dir.account("ops@example.com")
    for n in range(97):
        data_dir.watch(account, "ethereum", evm_address(n))
    data_dir.watch(account, "ethereum", evm_address(97), Environment.TEST)  # the cap spans both environments
    source = tmp_path / "watch.csv"
    source.write_text(
        "address,chain,label\n"
        f"{evm_address(500)},,a\n"  # 2: the 99th
        f"{evm_address(501)},,b\n"  # 3: the 100th
        f"{evm_address(502)},,c\n"  # 4: over the cap
        f"{evm_address(3)},ethereum,d\n"  # 5: already watched: not counted, not rejected
        "0x1234,,bad\n"  # 6: invalid anyway
        f"{evm_address(503)},base,e\n",  # 7: over the cap
        encoding="utf-8",
    )
    assert _import(data_dir, source) == 1
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert [line.split(":")[1] for line in errors] == ["4", "6", "7"]
    assert "LIM_001" in errors[0] and "free plan allows 100" in errors[0] and "LIM_001" in errors[2]
    assert "SCAN_001" in errors[1]
    assert "imported 2, already watched 1, rejected 3" in captured.out
    assert _count(data_dir, account) == 100


def test_enterprise_cap_comes_from_the_setting(
    data_dir: DataDir, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = data_dir.account("ops@example.com")
    data_dir.run(lambda db: SqlStore(db).set_plan("ops@example.com", Plan.ENTERPRISE))
    monkeypatch.setenv("QDAY_ENTERPRISE_WATCH_CAP", "2")
    source = tmp_path / "watch.csv"
    source.write_text("address\n" + "".join(f"{evm_address(600 + n)}\n" for n in range(4)), encoding="utf-8")
    assert _import(data_dir, source, "test") == 1
    captured = capsys.readouterr()
    assert [line.split(":")[1] for line in captured.err.strip().splitlines()] == ["4", "5"]
    assert "enterprise plan allows 2 " in captured.err
    assert "imported 2, already watched 0, rejected 2" in captured.out
    assert _count(data_dir, account) == 2
