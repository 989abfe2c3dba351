"""Shared set-up of the client tests: a real ``qday serve`` whose EVM chains
(test environment) read the session anvil node, and accounts made through the SDK."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from qday_client import QdayClient
from tests.anvil import Anvil
from tests.support import ServerProcess

PASSWORD = "correct horse battery staple"
_numbers = itertools.count(1)


def start_server(data_dir, anvil: Anvil, **env: str) -> ServerProcess:
    """A real server on 127.0.0.1 with generous rate limits (unless ``env`` says
    otherwise) and ``ethereum`` test-environment scans against anvil."""
    return ServerProcess(
        data_dir,
        env={
            "QDAY_RATE_LIMIT_MULTIPLIER": "1000",
            "QDAY_TEST_ETHEREUM_RPC_URL": anvil.url,
            "QDAY_FAMILY_CHAINS": "ethereum",
            **env,
        },
    )


@dataclass
class Account:
    """An account made through the SDK, with one secret test-environment key."""

    email: str
    key_id: str
    key: str = field(repr=False)


async def new_account(base_url: str) -> Account:
    """Register, log in and create a secret test key, all through ``QdayClient``."""
    email = f"client{next(_numbers)}-{time.monotonic_ns()}@example.com"
    async with QdayClient(base_url=base_url) as client:
        await client.register_account(email, PASSWORD)
        login = await client.login(email, PASSWORD)
        created = await client.create_api_key("sdk", "secret", "test", token=login.token)
    return Account(email, created.id, created.key)
