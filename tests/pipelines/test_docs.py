"""docs/analytics.md cannot drift: its schema tables match the views, its queries run."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from dagster import materialize

from chains.keys import KECCAK_CHAINS
from pipelines.assets import RESCORING_ASSETS, chain_readiness, risk_checks
from pipelines.resources import SnapshotChainDataResource
from pipelines.sources import write_snapshot
from tests.pipelines.support import DataDir, evm_address, evm_observation

DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"


def schema_block(text: str, name: str) -> list[tuple[str, str]]:
    block = re.search(rf"<!-- check:schema:{name} -->\n(.*?)<!-- /check:schema:{name} -->", text, re.S)
    assert block, f"no schema block {name}"
    rows = [line.split("|")[1:3] for line in block.group(1).strip().splitlines()[2:]]
    return [(column.strip(), dtype.strip()) for column, dtype in rows]


def test_schema_tables_match_the_views(data_dir: DataDir) -> None:
    text = DOC.read_text(encoding="utf-8")
    con = data_dir.analytics.connect()

    def described(view: str) -> list[tuple[str, str]]:
        return [(row[0], row[1]) for row in con.execute(f"DESCRIBE {view}").fetchall()]

    for view in (
        "watchlist",
        "address_observations",
        "native_prices",
        "key_exposure",
        "chain_readiness",
        "wallet_risk",
    ):
        assert schema_block(text, view) == described(view), view
    observations = schema_block(text, "address_observations")
    shared = observations[: [c for c, _ in observations].index("family") + 1]
    assert shared + schema_block(text, "address_risk:scores") == described("address_risk")


def test_example_queries_run_on_two_days_of_data(data_dir: DataDir, tmp_path: Path) -> None:
    account = data_dir.account("a@example.com")
    addresses = [evm_address(n) for n in range(1, 11)]
    for n, address in enumerate(addresses):
        data_dir.watch(account, "ethereum", address, label=f"wallet {n}")
    yesterday, today = data_dir.today - timedelta(days=1), data_dir.today
    for day, scale in ((yesterday, 1), (today, 1000)):  # balances grow: bands move up
        snapshot = tmp_path / f"{day}.jsonl"
        write_snapshot(snapshot, [evm_observation(a, n * 10**16 * scale, n % 3) for n, a in enumerate(addresses, 1)])
        resources = data_dir.resources(chain_data=SnapshotChainDataResource(snapshot_file=str(snapshot)))
        run = materialize([*RESCORING_ASSETS, *risk_checks], partition_key=f"ethereum|{day}", resources=resources)
        assert run.success
        assert materialize([chain_readiness], partition_key=day.isoformat(), resources=resources).success
    con = data_dir.analytics.connect()
    queries = re.findall(r"<!-- check:query -->\n```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(queries) == 7
    results = [con.execute(query).fetchall() for query in queries]
    riskiest, trend, changed, by_grade, revealed, incomplete, grade_changes = results
    assert riskiest and {row[0] for row in riskiest} == {"ethereum"}
    assert [row[0] for row in trend] == [yesterday, today] and all(row[2] == 10 for row in trend)
    assert changed and all(row[5] != row[7] for row in changed)
    assert by_grade == [("C", "ethereum", 10, by_grade[0][3])]
    signed = [a for n, a in enumerate(addresses, 1) if n % 3]  # a nonce: revealed on ethereum itself
    assert sorted(row[3] for row in revealed) == sorted(signed) and {row[8] for row in revealed} == {"nonce"}
    assert incomplete and {row[0] for row in incomplete} <= {c.value for c in KECCAK_CHAINS}  # ethereum alone ran
    assert grade_changes == []
