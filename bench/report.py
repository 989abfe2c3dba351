"""The benchmark report: every bench's figures beside their ceilings, medians of several runs.

Run ``python -m bench.report [--runs 3] [--only bench_api bench_pqc] [--rescore-sizes …]``
(``make bench`` does, with anvil and the SoftHSM2 test token). Each bench module in
``BENCHES`` exposes ``measure(**options) -> list[Figure]``; its own ``main`` prints the
same figures with ``print_figures``. The runner starts every bench ``--runs`` times, each
run in a fresh child process (``--child``), so no run inherits another's memory, servers or
warm caches, streams the bench's own progress, then writes ``bench/REPORT.md`` and
``bench/report.json``: for each figure the median value, the median ceiling measured in the
same runs, the median of the per-run ratios, the target and whether it was met, plus the
machine's facts (cores, load, Python, date, git commit). Nothing here asserts on time: a
missed target is reported and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import operator
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHES = (
    "bench_pqc",
    "bench_api",
    "bench_scan",
    "bench_attest",
    "bench_custody",
    "bench_scoring",
    "bench_chains",
    "bench_rescore",
    "bench_bitcoin_snapshot",
    "bench_bitcoin_index",
    "bench_bip32",
    "bench_wallet",
    "bench_nodes",
    "bench_alerts",
    "bench_dashboard",
)
_COMPARE = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Figure:
    """One measured figure beside the ceiling measured in the same run.

    ``ratio`` is ``value / ceiling``. ``target`` bounds the ratio (``on="ratio"``) or, for
    the few absolute targets, the value itself (``on="value"``), compared with ``compare``;
    a figure without a target is reported for information."""

    name: str
    value: float
    unit: str
    ceiling: float | None = None
    ceiling_name: str = ""
    target: float | None = None
    compare: str = ">="
    on: str = "ratio"

    @property
    def ratio(self) -> float | None:
        """The figure over its ceiling (None without a ceiling)."""
        return None if not self.ceiling else self.value / self.ceiling

    @property
    def met(self) -> bool | None:
        """Whether the target is met (None when there is no target)."""
        return self.judge(self.ratio)

    def judge(self, ratio: float | None) -> bool | None:
        """Whether the target is met when the ratio is ``ratio`` (the report passes the
        median of several runs' ratios); None when there is no target."""
        if self.target is None:
            return None
        measured = ratio if self.on == "ratio" else self.value
        return measured is not None and _COMPARE[self.compare](measured, self.target)

    def line(self) -> str:
        """One human-readable line: figure, ceiling, ratio, target and verdict."""
        text = f"{self.name}: {_number(self.value)} {self.unit}"
        if self.ceiling:
            text += f"; {self.ceiling_name or 'ceiling'} {_number(self.ceiling)} {self.unit}; ratio {self.ratio:.2f}"
        if self.target is not None:
            text += f" (target {self.on} {self.compare} {_number(self.target)}) {'OK' if self.met else 'BELOW TARGET'}"
        return text


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3g}"


def print_figures(figures: Sequence[Figure]) -> int:
    """Print every figure's line; the exit status a bench's ``main`` returns: 1 if a target is missed."""
    for figure in figures:
        print(figure.line(), flush=True)
    return 1 if any(figure.met is False for figure in figures) else 0


# --- The runner ----------------------------------------------------------------------------


def _child(module_name: str, options: dict[str, Any], out: Path) -> None:
    """In a fresh process: run one bench's ``measure`` and write its figures as JSON."""
    module = importlib.import_module(f"bench.{module_name}")
    figures = module.measure(**options)
    out.write_text(json.dumps([asdict(f) for f in figures]))


def _run_once(module_name: str, options: dict[str, Any], timeout: float) -> tuple[list[Figure], str | None]:
    """One run of one bench in a child process: its figures, or the reason it produced none."""
    with tempfile.TemporaryDirectory(prefix="qday-report-") as tmp:
        out = Path(tmp) / "figures.json"
        argv = [
            sys.executable,
            "-m",
            "bench.report",
            "--child",
            module_name,
            "--options",
            json.dumps(options),
            "--out",
            str(out),
        ]
        try:
            finished = subprocess.run(argv, cwd=REPO_ROOT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return [], f"timed out after {timeout:.0f} s"
        if finished.returncode != 0 or not out.exists():
            return [], f"exited with status {finished.returncode}"
        return [Figure(**row) for row in json.loads(out.read_text())], None


def median_figure(runs: Sequence[Figure]) -> tuple[Figure, float | None]:
    """The median figure of several runs, and the median of the per-run ratios (each ratio
    pairs a figure with the ceiling of its own run, which is what the noise cancels in)."""
    first = runs[0]
    ceilings = [f.ceiling for f in runs if f.ceiling]
    ratios = [f.ratio for f in runs if f.ratio is not None]
    merged = Figure(
        **{
            **asdict(first),
            "value": statistics.median(f.value for f in runs),
            "ceiling": statistics.median(ceilings) if ceilings else None,
        }
    )
    return merged, statistics.median(ratios) if ratios else None


def machine_facts() -> dict[str, Any]:
    """What the numbers were measured on: cores, load, Python, platform, date, commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "cores": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": commit,
        "git_tree_modified": bool(dirty),
    }


def _rows(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for bench, result in results.items():
        by_name: dict[str, list[Figure]] = {}
        for run in result["runs"]:
            for figure in run:
                by_name.setdefault(figure.name, []).append(figure)
        for runs in by_name.values():
            figure, ratio = median_figure(runs)
            rows.append(
                {
                    "bench": bench,
                    **asdict(figure),
                    "ratio": ratio,
                    "met": figure.judge(ratio),
                    "runs": len(runs),
                    "values": [f.value for f in runs],
                }
            )
    return rows


def _cell(value: float | None) -> str:
    return "–" if value is None else _number(value)


def write_markdown(
    path: Path, facts: dict[str, Any], rows: list[dict[str, Any]], results: dict[str, dict[str, Any]], runs: int
) -> None:
    """``bench/REPORT.md``: the machine, then one table row per figure, then failures."""
    lines = [
        "# Benchmark report",
        "",
        f"Written by `python -m bench.report` ({runs} run(s) of each bench, each in a fresh process; medians).",
        "Every figure stands beside a ceiling measured in the same run on the same machine; the ratio is the",
        "median of the per-run ratios. The machine is small and shared, so the ratios matter, not absolute times.",
        "",
        f"- cores: {facts['cores']}, load average at the start: {facts['load_average']}",
        f"- Python {facts['python']} on {facts['platform']}",
        f"- date: {facts['date']}, git commit `{facts['git_commit'][:12]}`"
        + (" (with uncommitted changes)" if facts["git_tree_modified"] else ""),
        "",
        "| bench | figure | value | unit | ceiling | ceiling is | ratio | target | met |",
        "|---|---|---:|---|---:|---|---:|---|---|",
    ]
    for r in rows:
        target = "–" if r["target"] is None else f"{r['on']} {r['compare']} {_number(r['target'])}"
        met = {None: "–", True: "yes", False: "**no**"}[r["met"]]
        lines.append(
            f"| {r['bench']} | {r['name']} | {_cell(r['value'])} | {r['unit']} | {_cell(r['ceiling'])} "
            f"| {r['ceiling_name'] or '–'} | {_cell(r['ratio'])} | {target} | {met} |"
        )
    problems = [(bench, reason) for bench, result in results.items() for reason in result["errors"]]
    if problems:
        lines += ["", "## Runs without figures", ""]
        lines += [f"- {bench}: {reason}" for bench, reason in problems]
    path.write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benches, print progress, write the report; 1 if a target is missed or a run fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each bench (medians)")
    parser.add_argument("--only", nargs="+", choices=BENCHES, default=list(BENCHES))
    parser.add_argument(
        "--rescore-sizes",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="watched addresses per rescoring run (peak RSS must not grow with N)",
    )
    parser.add_argument("--scoring-rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--timeout", type=float, default=3600, help="seconds allowed for one run of one bench")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "bench")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, json.loads(args.options), args.out)
        return 0
    options: dict[str, dict[str, Any]] = {
        "bench_rescore": {"sizes": args.rescore_sizes},
        "bench_scoring": {"rows": args.scoring_rows},
    }
    facts = machine_facts()
    print(
        f"[report] {len(args.only)} benches x {args.runs} runs on {facts['cores']} cores, "
        f"load {facts['load_average']}, commit {facts['git_commit'][:12]}",
        flush=True,
    )
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {name: {"runs": [], "errors": []} for name in args.only}
    for run in range(1, args.runs + 1):
        for index, name in enumerate(args.only, start=1):
            print(
                f"\n[report] run {run}/{args.runs}, {name} ({index}/{len(args.only)}), "
                f"{time.monotonic() - started:.0f} s elapsed",
                flush=True,
            )
            figures, error = _run_once(name, options.get(name, {}), args.timeout)
            if error:
                print(f"[report] {name}: {error}", flush=True)
                results[name]["errors"].append(f"run {run}: {error}")
            elif not figures:
                results[name]["errors"].append(f"run {run}: skipped (see its output)")
            results[name]["runs"].append(figures)
    rows = _rows(results)
    facts["seconds"] = round(time.monotonic() - started)
    args.output.mkdir(parents=True, exist_ok=True)
    write_markdown(args.output / "REPORT.md", facts, rows, results, args.runs)
    (args.output / "report.json").write_text(
        json.dumps(
            {
                "machine": facts,
                "runs": args.runs,
                "figures": rows,
                "errors": {name: r["errors"] for name, r in results.items() if r["errors"]},
            },
            indent=2,
        )
        + "\n"
    )
    print(
        f"\n[report] {len(rows)} figures in {facts['seconds']} s -> {args.output / 'REPORT.md'}, "
        f"{args.output / 'report.json'}"
    )
    missed = [r for r in rows if r["met"] is False]
    for r in missed:
        measured = r["ratio"] if r["on"] == "ratio" else r["value"]
        print(
            f"[report] BELOW TARGET: {r['bench']} {r['name']}: {r['on']} {_cell(measured)}, "
            f"target {r['compare']} {_number(r['target'])}"
        )
    return 1 if missed or any(r["errors"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
