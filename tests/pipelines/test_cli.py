"""``qday sql`` and ``qday watch import``."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import duckdb
from dagster import materialize

from cli.main import main
from pipelines.assets import RESCORING_ASSETS, risk_checks
from tests.pipelines.support import DataDir, evm_address, partition


def test_sql_command_prints_csv(snapshot_world, capsys) -> None:
    data_dir, resources = snapshot_world(12)
    run = materialize(
        [*RESCORING_ASSETS, *risk_checks], partition_key=partition("ethereum", data_dir.today), resources=resources
    )
    assert run.success
    capsys.readouterr()
    code = main(
        [
            "sql",
            "--data-dir",
            str(data_dir.root),
            "-c",
            "SELECT address, risk_score, risk_value, balance, public_key FROM address_risk_latest"
            " ORDER BY risk_value DESC, address LIMIT 3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["address", "risk_score", "risk_value", "balance", "public_key"]
    assert len(rows) == 4 and all(r[0].startswith("0x") and r[1] in ("W1", "W2", "W3", "W4") for r in rows[1:])
    assert int(rows[1][2]) >= int(rows[2][2]) >= int(rows[3][2]) and rows[1][4] == ""


def test_sql_command_reports_errors(data_dir: DataDir, capsys) -> None:
    assert main(["sql", "--data-dir", str(data_dir.root), "-c", "SELECT * FROM no_such_view"]) == 1
    assert "no_such_view" in capsys.readouterr().err


def test_sql_shell_reads_statements_from_piped_input(data_dir: DataDir, capsys, monkeypatch) -> None:
    script = (
        ".tables\nSELECT 1 AS one,\n  'two' AS two;\nSELECT count(*) AS n FROM address_risk; SELECT 42 AS x;\n"
        "SELECT nope;\n.quit\nSELECT 'not reached';\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    assert main(["sql", "--data-dir", str(data_dir.root)]) == 0
    captured = capsys.readouterr()
    assert "address_risk_latest" in captured.out and "| one | two |" in captured.out
    assert "| 42 |" in captured.out and "not reached" not in captured.out
    assert "nope" in captured.err


def test_sql_writes_a_read_only_catalog(data_dir: DataDir, tmp_path: Path, capsys) -> None:
    catalog = tmp_path / "views.duckdb"
    assert main(["sql", "--data-dir", str(data_dir.root), "--write-catalog", str(catalog)]) == 0
    con = duckdb.connect(str(catalog), read_only=True)
    assert con.execute("SELECT count(*) FROM address_risk").fetchall() == [(0,)]
    con.close()


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_watch_import_adds_good_rows_and_reports_bad_ones(data_dir: DataDir, tmp_path: Path, capsys) -> None:
    data_dir.account("ops@example.com")
    lower = evm_address(0xAB).lower()
    source = write_csv(
        tmp_path / "watch.csv",
        (
            "address,chain,label\n"
            f"{lower},,treasury\n"  # 2: EVM, no chain: ethereum, canonical form stored
            f"{evm_address(0xAB)},base,treasury on base\n"  # 3
            "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex,,cold\n"  # 4: detected bitcoin
            "0x1234,,short\n"  # 5: bad address
            f"{evm_address(1)},dogecoin,\n"  # 6: unknown chain
            ",,empty\n"  # 7: no address
            "cosmos1notreally,cosmos,x\n"  # 8: bad checksum
            f"{lower},ethereum,duplicate\n"  # 9: already watched (line 2)
        ),
    )
    code = main(
        [
            "watch",
            "import",
            str(source),
            "--account",
            "OPS@example.com",
            "--environment",
            "live",
            "--data-dir",
            str(data_dir.root),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    errors = captured.err.strip().splitlines()
    assert [line.split(":")[1] for line in errors] == ["5", "6", "7", "8"]
    assert "SCAN_001" in errors[0] and "SCAN_002" in errors[1] and "empty" in errors[2]
    assert "imported 3, already watched 1, rejected 4" in captured.out
    conn = data_dir.connect()
    rows = conn.execute("SELECT chain, address, label, environment FROM watchlist ORDER BY chain").fetchall()
    conn.close()
    assert rows == [
        ("base", evm_address(0xAB), "treasury on base", "live"),
        ("bitcoin", "bc1qrw8us6s8x05ks479fyevq03qr243m703jmvdex", "cold", "live"),
        ("ethereum", evm_address(0xAB), "treasury", "live"),
    ]


def test_watch_import_usage_errors(data_dir: DataDir, tmp_path: Path, capsys) -> None:
    data_dir.account("ops@example.com")
    good = write_csv(tmp_path / "good.csv", f"address\n{evm_address(1)}\n")
    base = ["--environment", "test", "--data-dir", str(data_dir.root)]
    assert main(["watch", "import", str(good), "--account", "nobody@example.com", *base]) == 2
    bad_header = write_csv(tmp_path / "bad.csv", "addr,chain\nx,y\n")
    assert main(["watch", "import", str(bad_header), "--account", "ops@example.com", *base]) == 2
    assert main(["watch", "import", str(tmp_path / "missing.csv"), "--account", "ops@example.com", *base]) == 2
    assert main(["watch", "import", str(good), "--account", "ops@example.com", *base]) == 0
    assert "imported 1" in capsys.readouterr().out
