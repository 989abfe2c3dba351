"""The code location loads; the schedules, sensor and instance configuration are as documented."""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl
import yaml
from dagster import AssetKey, DagsterInstance, Definitions, build_schedule_context, materialize

from chains.keys import family_group
from chains.registry import CHAINS, Chain
from cli.supervisor import REPO_DAGSTER_HOME, prepare_dagster_home
from pipelines.assets import CHAIN_DAY, all_chains_graded, chain_readiness
from pipelines.definitions import build_definitions
from services.settings import load_settings
from tests.pipelines.support import DataDir


def test_definitions_load(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("QDAY_DATA_DIR", str(tmp_path))
    module = importlib.import_module("pipelines.definitions")
    defs = module.defs() if callable(module.defs) else module.defs
    Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {job.name for job in repo.get_all_jobs()} >= {
        "observe_watched",
        "score_watched",
        "rescore_watched",
        "chain_readiness_job",
        "score_new_watched",
    }
    assert repo.get_sensor_def("new_watched_sensor").minimum_interval_seconds == 30
    assert repo.get_sensor_def("observed_families_sensor").minimum_interval_seconds == 30
    analytics = defs.resources["analytics"]
    assert Path(analytics.root) == tmp_path.resolve() / "analytics"
    assert defs.resources["chain_data"].family_chains == [c.value for c in CHAINS]  # the settings' default: all


def test_the_phases_split_the_rescoring_assets() -> None:
    repo = build_definitions(load_settings(env={})).get_repository_def()

    def assets_of(job: str) -> set[str]:
        graph = repo.get_job(job).asset_layer.asset_graph
        return {key.to_user_string() for key in graph.executable_asset_keys}

    observe, score = assets_of("observe_watched"), assets_of("score_watched")
    assert observe == {"watched_addresses", "family_targets", "chain_observations", "key_exposure", "native_prices"}
    assert score == {"address_risk", "published_scan_results"}
    assert assets_of("rescore_watched") == observe | score
    checks = {key.name for key in repo.get_job("score_watched").asset_layer.asset_graph.asset_check_keys}
    assert checks == {"no_null_scores", "weights_sum_to_one", "row_counts_match", "family_links_hold"}


def test_a_chains_score_depends_on_its_family_groups_observations_of_the_day() -> None:
    graph = build_definitions(load_settings(env={})).resolve_asset_graph()
    risk = AssetKey("address_risk")
    mapping = graph.get(risk).partition_mappings[AssetKey("key_exposure")]
    for chain, expected in (("ethereum", 16), ("bitcoin", 2), ("solana", 1)):
        downstream = CHAIN_DAY.subset_with_partition_keys([f"{chain}|2026-11-22"])
        upstream = mapping.get_upstream_mapped_partitions_result_for_partitions(downstream, CHAIN_DAY, CHAIN_DAY)
        keys = sorted(upstream.partitions_subset.get_partition_keys())
        assert len(keys) == expected and all(k.endswith("|2026-11-22") for k in keys), chain
        assert {k.split("|")[0] for k in keys} == {c.value for c in family_group(Chain(chain))}


def test_the_observe_schedule_runs_every_chain_daily() -> None:
    defs = build_definitions(load_settings(env={}))
    repo = defs.get_repository_def()
    schedule = repo.get_schedule_def("observe_daily")
    assert schedule.job_name == "observe_watched"
    assert schedule.cron_schedule == "0 2 * * *" and schedule.execution_timezone in (None, "UTC")
    with DagsterInstance.ephemeral() as instance:
        context = build_schedule_context(
            instance=instance, repository_def=repo, scheduled_execution_time=datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
        )
        keys = sorted(str(r.partition_key) for r in schedule.evaluate_tick(context).run_requests)
    assert keys == sorted(f"{chain.value}|2026-11-22" for chain in CHAINS)
    assert repo.get_schedule_def("chain_readiness_daily").cron_schedule == "30 1 * * *"


def test_the_instance_config_keeps_telemetry_off_and_runs_one_partition_at_a_time(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO_DAGSTER_HOME / "dagster.yaml").read_text())
    assert config["telemetry"] == {"enabled": False}
    limits = config["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
    home = prepare_dagster_home(tmp_path / "data")
    assert home == (tmp_path / "data").resolve() / "dagster"
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == config
    workspace = yaml.safe_load((home / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == "pipelines.definitions"


def test_chain_readiness_snapshot(data_dir: DataDir, today: date) -> None:
    resources = {"analytics": data_dir.resources()["analytics"]}
    result = materialize([chain_readiness, all_chains_graded], partition_key=today.isoformat(), resources=resources)
    assert result.success and all(c.passed for c in result.get_asset_check_evaluations())
    frame = pl.read_parquet(data_dir.analytics.daily_file("chain_readiness", today))
    assert frame["chain"].n_unique() == 19
    con = data_dir.analytics.connect()
    grades = dict(con.execute("SELECT DISTINCT chain, grade FROM chain_readiness_latest").fetchall())
    assert grades["bitcoin"] == "D" and grades["solana"] == "D" and len(grades) == 19
