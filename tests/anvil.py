"""Helpers for tests and benchmarks against anvil, Foundry's local EVM node.

``anvil_binary()`` finds the binary (``QDAY_ANVIL``, else ``make anvil``'s install under
``.tools``). ``Anvil`` runs one node on a free loopback port. Its methods send real signed
transactions and use anvil's cheat codes (``anvil_setBalance``, ``anvil_setCode``,
``anvil_setStorageAt``). ``assemble`` builds the tiny contracts the tests deploy: there is
no Solidity compiler here, and ten opcodes are enough.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from tests.processes import free_port, stop_group

REPO_ROOT = Path(__file__).resolve().parent.parent
ANVIL_PACKAGE = "@foundry-rs/anvil-linux-amd64"
DEFAULT_ANVIL = REPO_ROOT / ".tools" / "node_modules" / ANVIL_PACKAGE / "bin" / "anvil"
GWEI = 10**9


def anvil_binary() -> Path | None:
    """The anvil executable (``QDAY_ANVIL`` or ``.tools/…/bin/anvil``), or None when absent."""
    path = Path(os.environ.get("QDAY_ANVIL") or DEFAULT_ANVIL)
    return path if path.is_file() and os.access(path, os.X_OK) else None


MISSING_ANVIL = f"anvil not found (set QDAY_ANVIL or run `make anvil`, which installs {ANVIL_PACKAGE} into .tools/)"


class RpcFailed(RuntimeError):
    """anvil answered a helper call with a JSON-RPC error."""


def running_anvil(chain_id: int) -> Iterator[Anvil]:
    """A fixture's body: one anvil node with ``chain_id`` while the fixture lasts (the test
    skips when the binary is absent)."""
    binary = anvil_binary()
    if binary is None:
        pytest.skip(MISSING_ANVIL)
    node = Anvil(binary, chain_id=chain_id)
    try:
        yield node
    finally:
        node.stop()


class Anvil:
    """One anvil process on 127.0.0.1 (its own process group), stopped by ``stop``."""

    def __init__(self, binary: Path, chain_id: int = 31337, port: int | None = None) -> None:
        """Start anvil silently with ``chain_id`` and wait until it answers."""
        self.chain_id = chain_id
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(binary), "--host", "127.0.0.1", "--port", str(self.port), "--chain-id", str(chain_id), "--silent"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._http = httpx.Client(timeout=30)
        self._ids = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"anvil exited: {self.process.stderr.read().decode() if self.process.stderr else ''}"
                )
            try:
                self.rpc("eth_chainId")
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("anvil did not start within 30 s")

    def rpc(self, method: str, *params: Any) -> Any:
        """Call a JSON-RPC method and return its result (``RpcFailed`` on an error object)."""
        self._ids += 1
        answer = self._http.post(
            self.url, json={"jsonrpc": "2.0", "id": self._ids, "method": method, "params": list(params)}
        ).json()
        if answer.get("error"):
            raise RpcFailed(f"{method}: {answer['error']}")
        return answer["result"]

    def fund(self, address: str, wei: int) -> None:
        """Set an account's balance (anvil cheat code)."""
        self.rpc("anvil_setBalance", address, hex(wei))

    def new_account(self, wei: int = 10**20) -> LocalAccount:
        """A fresh key, funded with ``wei``."""
        account = Account.create()
        self.fund(account.address, wei)
        return account

    def send(self, account: LocalAccount, tx: dict[str, Any], **sign_options: Any) -> dict[str, Any]:
        """Sign ``tx`` with ``account`` (nonce and chain id filled in when absent), send it
        and return its receipt once anvil has mined it."""
        tx = {
            "nonce": int(self.rpc("eth_getTransactionCount", account.address, "latest"), 16),
            "chainId": self.chain_id,
            **tx,
        }
        if tx["chainId"] is None:
            del tx["chainId"]  # pre-EIP-155 legacy: no chain id in the signed payload
        signed = account.sign_transaction(tx, **sign_options)
        tx_hash = self.rpc("eth_sendRawTransaction", "0x" + signed.raw_transaction.hex())
        deadline = time.monotonic() + 10
        while (receipt := self.rpc("eth_getTransactionReceipt", tx_hash)) is None and time.monotonic() < deadline:
            time.sleep(0.01)  # automine runs just after the send returns
        if receipt is None or receipt["status"] != "0x1":
            raise RpcFailed(f"transaction {tx_hash} failed: {receipt}")
        return receipt

    def stop(self) -> None:
        """Stop the node."""
        self._http.close()
        stop_group(self.process, timeout=10)


# --- a ten-opcode assembler -------------------------------------------------------------

OPCODES = {
    "STOP": 0x00,
    "EQ": 0x14,
    "SHR": 0x1C,
    "CALLDATALOAD": 0x35,
    "CODECOPY": 0x39,
    "MSTORE": 0x52,
    "SLOAD": 0x54,
    "JUMPI": 0x57,
    "JUMPDEST": 0x5B,
    "DUP1": 0x80,
    "RETURN": 0xF3,
    "REVERT": 0xFD,
}


def assemble(program: Sequence[str | int | tuple[str, int]]) -> bytes:
    """Bytecode from opcode names, ``("PUSH", value)`` items and ``("LABEL", n)`` /
    ``("JUMP_TO", n)`` pairs (a 1-byte push of label ``n``'s offset)."""
    labels: dict[int, int] = {}
    for pass_ in range(2):
        code = bytearray()
        for item in program:
            if isinstance(item, tuple) and item[0] == "LABEL":
                labels[item[1]] = len(code)
                code.append(OPCODES["JUMPDEST"])
            elif isinstance(item, tuple) and item[0] == "JUMP_TO":
                code += bytes([0x60, labels.get(item[1], 0) if pass_ else 0])
            elif isinstance(item, tuple):
                value = item[1]
                width = max(1, (value.bit_length() + 7) // 8)
                code += bytes([0x5F + width]) + value.to_bytes(width, "big")
            else:
                code.append(OPCODES[item])
    return bytes(code)


def deployment_code(runtime: bytes) -> bytes:
    """Init code that returns ``runtime`` (CODECOPY of the bytes after the 12-byte prefix)."""
    prefix = assemble(
        [("PUSH", len(runtime)), ("PUSH", 12), ("PUSH", 0), "CODECOPY", ("PUSH", len(runtime)), ("PUSH", 0), "RETURN"]
    )
    assert len(prefix) == 12, "runtime too long for the one-byte pushes"
    return prefix + runtime


def mock_aggregator_runtime() -> bytes:
    """A Chainlink-aggregator stand-in: ``latestRoundData()`` returns storage slots 0-4
    (roundId, answer, startedAt, updatedAt, answeredInRound), ``decimals()`` slot 5."""

    def slot_to_memory(slot: int) -> list[str | tuple[str, int]]:
        """Copy storage slot ``slot`` to memory word ``slot``."""
        return [("PUSH", slot), "SLOAD", ("PUSH", 32 * slot), "MSTORE"]

    return assemble(
        [
            ("PUSH", 0),
            "CALLDATALOAD",
            ("PUSH", 0xE0),
            "SHR",
            "DUP1",
            ("PUSH", 0x313CE567),
            "EQ",
            ("JUMP_TO", 1),
            "JUMPI",
            ("PUSH", 0xFEAF968C),
            "EQ",
            ("JUMP_TO", 2),
            "JUMPI",
            ("PUSH", 0),
            ("PUSH", 0),
            "REVERT",
            ("LABEL", 1),
            ("PUSH", 5),
            "SLOAD",
            ("PUSH", 0),
            "MSTORE",
            ("PUSH", 32),
            ("PUSH", 0),
            "RETURN",
            ("LABEL", 2),
            *[op for slot in range(5) for op in slot_to_memory(slot)],
            ("PUSH", 160),
            ("PUSH", 0),
            "RETURN",
        ]
    )
