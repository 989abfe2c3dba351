"""The ``qday-client`` command end to end: every subcommand run as a real
process against a real server on 127.0.0.1 (EVM scans on the session anvil),
and docs/quickstart.md's command block run as written."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account import Account

from qday_client.cli import main as client_main
from tests.client.support import PASSWORD
from tests.support import REPO_ROOT

BIN = Path(sys.executable).parent
QUICKSTART = REPO_ROOT / "docs" / "quickstart.md"
DOC_URL = "http://127.0.0.1:8000"


class Cli:
    """Runs ``qday-client`` for one test: in this process (``main(argv)``, the
    command's own code) or, with ``command=``, as a real child process."""

    def __init__(self, workdir: Path, base_url: str, capsys, monkeypatch) -> None:
        self.workdir, self.capsys = workdir, capsys
        for name, value in {
            "HOME": str(workdir),
            "QDAY_API_URL": base_url,
            "QDAY_PASSWORD": PASSWORD,
            "QDAY_CLIENT_CONFIG": str(workdir / "client.toml"),
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("QDAY_API_KEY", raising=False)
        monkeypatch.chdir(workdir)

    def run(self, *args: str, expect: int = 0) -> tuple[str, str]:
        """Run ``qday-client ARGS``; assert its exit status; return (stdout, stderr)."""
        self.capsys.readouterr()
        status = client_main(list(args))
        out, err = self.capsys.readouterr()
        assert status == expect, f"{args}: exit {status}\n{out}\n{err}"
        return out, err

    def json(self, *args: str, expect: int = 0) -> object:
        """Run with ``--json`` and parse stdout."""
        return json.loads(self.run(*args, "--json", expect=expect)[0])

    def process(self, *args: str, command: str = "qday-client", expect: int = 0) -> subprocess.CompletedProcess:
        """Run the installed console script in a child process."""
        done = subprocess.run(
            [str(BIN / command), *args],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == expect, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done


@pytest.fixture
def cli(server, tmp_path, capsys, monkeypatch) -> Cli:
    return Cli(tmp_path, server.base_url, capsys, monkeypatch)


def _quickstart_commands() -> list[str]:
    text = QUICKSTART.read_text()
    block = text.split("## The nine commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_quickstart_block_runs_as_written(server, tmp_path):
    commands = _quickstart_commands()
    assert len(commands) < 10
    script = "\n".join(c.replace(DOC_URL, server.base_url) for c in commands)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDAY_")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**env, "PATH": f"{BIN}:{env['PATH']}", "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^valid\s+yes$", done.stdout, re.M)
    assert stat.S_IMODE((tmp_path / "pq.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "qday-client.toml").stat().st_mode) == 0o600
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text())))
    assert [r["status"] for r in rows] == ["ok", "ok"] and rows[0]["chain"] == "ethereum"
    assert "2/2 scanned" in done.stderr
    assert json.loads((tmp_path / "attestation.json").read_text())["strict"] is True


def test_account_and_api_key_commands(cli, tmp_path):
    email = "keys-cli@example.com"
    assert cli.json("account", "register", "--email", email)["email"] == email
    failed = cli.run("account", "register", "--email", email, expect=1)
    assert "ACC_001" in failed[1] and "req_" in failed[1]
    created = cli.json("keys", "create", "--email", email, "--name", "ci", "--save")
    assert created["key"] in (tmp_path / "client.toml").read_text()
    second = cli.json("keys", "create", "--name", "other")  # with the saved secret key
    assert {k["id"] for k in cli.json("keys", "list")} == {created["id"], second["id"]}
    table = cli.run("keys", "list")[0]
    assert table.splitlines()[0].split()[:3] == ["id", "name", "type"] and created["key"] not in table
    rotated = cli.json("keys", "rotate", second["id"], "--email", email)
    assert rotated["rotatedFrom"] == second["id"]
    assert cli.json("keys", "delete", rotated["id"])["deleted"] is True
    assert "REQ_005" in cli.run("keys", "delete", rotated["id"], expect=1)[1]


def test_keygen_register_attest_verify(cli, tmp_path, monkeypatch):
    cli.run("account", "register", "--email", "sign-cli@example.com")
    cli.run("keys", "create", "--email", "sign-cli@example.com", "--save")
    made = cli.json("keygen", "--algorithm", "ml-dsa-44", "--out", "pq.key")
    assert made["algorithm"] == "ml-dsa-44" and stat.S_IMODE((tmp_path / "pq.key").stat().st_mode) == 0o600
    assert "exists" in cli.run("keygen", "--out", "pq.key", expect=2)[1]
    registered = cli.json("register", "pq.key")
    assert registered["fingerprint"] == made["fingerprint"] and registered["origin"] == "registered"

    wallet = Account.create()
    (tmp_path / "wallet.json").write_text(
        json.dumps(Account.encrypt(wallet.key, "keystore pw", kdf="pbkdf2", iterations=1000))
    )
    monkeypatch.setenv("QDAY_KEYSTORE_PASSWORD", "keystore pw")
    attestation = cli.json(
        "attest",
        "--ecdsa-key",
        "wallet.json",
        "--pq-key",
        "pq.key",
        "--message",
        "hello",
        "--context",
        "00ff",
        "--metadata",
        '{"desk": "ops"}',
    )
    assert (attestation["strict"], attestation["context"], attestation["metadata"]) == (False, "00ff", {"desk": "ops"})
    assert bytes.fromhex(attestation["message"]) == b"hello"
    assert cli.json("verify", attestation["id"])["valid"] is True
    assert "REQ_005" in cli.run("verify", "att_" + "0" * 30, expect=1)[1]
    monkeypatch.setenv("QDAY_KEYSTORE_PASSWORD", "wrong")
    assert (
        "wrong keystore password" in cli.run("attest", "--ecdsa-key", "wallet.json", "--pq-key", "pq.key", expect=2)[1]
    )
    monkeypatch.setenv("WALLET_KEY", wallet.key.hex())
    strict = json.loads(
        cli.process(
            "client", "attest", "--ecdsa-key", "env:WALLET_KEY", "--pq-key", "pq.key", "--json", command="qday"
        ).stdout
    )  # `qday client`, a real process
    assert strict["strict"] is True and cli.json("verify", strict["id"])["valid"] is True


def test_scan_one_address_and_a_file(cli, tmp_path, anvil):
    cli.run("account", "register", "--email", "scan-cli@example.com")
    cli.run("keys", "create", "--email", "scan-cli@example.com", "--save")
    funded = anvil.new_account(2 * 10**18)
    one = cli.json("scan", funded.address, "--chain", "ethereum")
    assert (one["address"], one["balanceAtRisk"]) == (funded.address, "2 ETH")
    human = cli.run("scan", funded.address, "--chain", "ethereum")[0]
    assert re.search(r"^riskScore\s+W[1-4]$", human, re.M) and re.search(r"^cached\s+yes$", human, re.M)
    assert "SCAN_001" in cli.run("scan", "0x1234", expect=1)[1]

    (tmp_path / "in.csv").write_text(f"address,chain\n{funded.address},ethereum\n# comment\n\n0x1234,ethereum\n")
    done = cli.process("scan", "--file", "in.csv", "--report", "out.json", "--progress", expect=3)
    report = json.loads((tmp_path / "out.json").read_text())
    assert [(r["line"], r["status"], r["errorCode"]) for r in report] == [(2, "ok", None), (5, "error", "SCAN_001")]
    assert "2/2 scanned, 1 failed" in done.stderr


def test_scan_key_finds_the_account_that_signed(cli, anvil):
    cli.run("account", "register", "--email", "scan-key-cli@example.com")
    cli.run("keys", "create", "--email", "scan-key-cli@example.com", "--save")
    signer = anvil.new_account(10**18)
    anvil.send(signer, {"to": signer.address, "value": 1, "gas": 21000, "gasPrice": 10**10})
    public_key = "04" + signer._key_obj.public_key.to_bytes().hex()
    found = cli.json("scan-key", public_key, "--chain", "ethereum")
    assert found["publicKeyExposed"] is True and found["keyType"] == "secp256k1"
    assert found["exposureEvidence"][0]["kind"] == "nonce"
    (evm,) = found["addresses"]
    assert (evm["chain"], evm["form"], evm["address"], evm["active"]) == ("ethereum", "evm", signer.address, True)
    human = cli.run("scan-key", public_key, "--chain", "ethereum")[0]
    assert re.search(r"^publicKeyExposed\s+yes$", human, re.M) and signer.address in human
    assert "PQC_002" in cli.run("scan-key", "02" + "00" * 32, expect=1)[1]
