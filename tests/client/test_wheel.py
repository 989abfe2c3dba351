"""The client installs on its own: its wheel (with the bundled pqc package) goes
into a fresh venv without the server's dependencies, and the key it generates
there is one the server's code accepts."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import pqc
from qday_client import keyfile
from tests.support import REPO_ROOT

UV = REPO_ROOT / ".venv" / "bin" / "uv"
CLIENT_PACKAGES = ("core", "pqc", "qday_client")


def _imported_distributions() -> set[str]:
    """Distributions providing the top-level modules that core, pqc and qday_client import."""
    modules = set()
    for package in (REPO_ROOT / "core", REPO_ROOT / "pqc", REPO_ROOT / "client" / "qday_client"):
        for source in package.glob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - set(CLIENT_PACKAGES) - {"__future__"}
    provided = packages_distributions()
    return {dist.lower() for module in third_party for dist in provided[module]}


def test_client_distribution_declares_everything_its_code_imports():
    declared = tomllib.loads((REPO_ROOT / "client" / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split("==")[0].split(">=")[0].lower() for d in declared}
    assert _imported_distributions() <= names


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
@pytest.mark.skipif(not UV.exists(), reason="uv is installed into .venv by `make install`")
def test_wheel_installs_without_server_dependencies_and_generates_keys(tmp_path):
    _run(UV, "build", "--quiet", "--wheel", "--out-dir", tmp_path / "dist", REPO_ROOT / "client", cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("qday_client-*.whl"))
    _run(UV, "venv", "--quiet", "--python", sys.executable, tmp_path / "venv", cwd=tmp_path)
    python = tmp_path / "venv" / "bin" / "python"
    _run(UV, "pip", "install", "--quiet", "--python", python, wheel, cwd=tmp_path)

    installed = {
        p.name.split("-")[0].lower() for p in (tmp_path / "venv").glob("lib/python*/site-packages/*.dist-info")
    }
    assert {"qday_client", "httpx", "pqcrypto", "coincurve"} <= installed
    assert not installed & {"sanic", "dagster", "duckdb", "polars", "web3", "argon2_cffi", "pydantic"}
    location = _run(python, "-c", "import pqc; print(pqc.__file__)", cwd=tmp_path).stdout
    assert str(tmp_path / "venv") in location  # the wheel's copy, not the repository's

    made = json.loads(
        _run(
            tmp_path / "venv" / "bin" / "qday-client",
            "keygen",
            "--algorithm",
            "ml-dsa-44",
            "--out",
            "pq.key",
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    keypair = keyfile.load(tmp_path / "pq.key")
    assert made["fingerprint"] == pqc.public_key_fingerprint(keypair.public_key)
    pqc.verify("ml-dsa-44", keypair.public_key, b"m", keyfile.sign(keypair, b"m"))
