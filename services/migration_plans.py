"""Migration plans (``POST /v1/plan/migration``): how to move a wallet's coins to a new wallet,
exposed coins first, as unsigned PSBTs the owner's signer executes. Free of HTTP.

The source wallet is scanned as ``POST /v1/scan/descriptor`` scans it (same walk, same
verdicts); ``chains.bitcoin.migration`` orders and groups its coins and caps each output;
the destination wallet's receive branch gives the outputs, from the first address after its
last used one, and every address a plan pays is looked up before it is offered: one that has
history is passed over, so each output is a fresh, unused address.

Each step is a BIP-174 PSBT, Creator and Updater only (the service never holds a private key
and never signs): per input the spent output (``witness_utxo``) for segwit inputs, and the
whole previous transaction (``non_witness_utxo``) for every input that is not taproot,
legacy and segwit v0 alike, since hardware wallets check the amounts of segwit v0 inputs
against it (the 2020 fee attack, CVE-2020-14199); redeem and witness scripts; BIP-32
derivations of every key (BIP-371 taproot fields for ``tr()``), and the same for each output,
so the signer recognises its own addresses. Inputs signal replaceability (BIP-125) so a step
can be fee-bumped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chains.bitcoin.descriptors import DerivedKey
from chains.bitcoin.migration import (
    Coin,
    Destination,
    MigrationPlan,
    UnplannableInput,
    input_size,
    plan_migration,
)
from chains.bitcoin.psbt import KeyOrigin, Psbt, PsbtInput, PsbtOutput, TapKeyOrigin, create_psbt, encode_psbt
from chains.bitcoin.tx import TxOut
from chains.bitcoin.wallet import DerivedAddress, WalletBranch, derive, parse_wallet
from chains.environment import Environment
from chains.registry import Chain
from services.accounts import Principal
from services.descriptor_scans import MAX_DERIVED, DescriptorScanService, exposure_rank, wallet_coverage
from services.errors import InvalidRequest
from services.observer import ChainObserver

#: The confirmation target of the default fee rate (blocks).
FEE_TARGET_BLOCKS = 6
#: The cap per destination address when none is given: 50 BTC.
DEFAULT_MAX_PER_ADDRESS_SAT = 50 * 100_000_000
#: BIP-125: any sequence below 0xfffffffe signals replaceability.
_REPLACEABLE = 0xFFFFFFFD
#: Times a plan is redone after finding one of its destinations already used.
_FRESHNESS_ATTEMPTS = 4


@runtime_checkable
class PlanSource(Protocol):
    """A Bitcoin client that gives fee estimates and whole previous transactions."""

    async def fee_rate(self, target_blocks: int) -> float:
        """The sat/vB rate estimated to confirm within ``target_blocks``."""
        ...

    async def transaction(self, txid: str) -> bytes:
        """The raw transaction ``txid``, checked against its id."""
        ...


@dataclass(frozen=True, slots=True)
class _Source:
    """A coin of the source wallet with the address it sits on and its exposure level."""

    coin: Coin
    derived: DerivedAddress
    exposure: str


def _origin(key: DerivedKey) -> KeyOrigin:
    return KeyOrigin(key.fingerprint, key.path)


def _key_fields(derived: DerivedAddress) -> dict[str, Any]:
    """The PSBT fields that name the keys of ``derived`` and the scripts that spend it."""
    descriptor = derived.branch.descriptor
    if descriptor.function == "tr":
        internal, *leaf_keys = derived.keys
        merkle_root, leaves = descriptor.taproot_tree(derived.index, derived.branch.path)
        derivations = {internal.pubkey: TapKeyOrigin((), _origin(internal))}
        for key in leaf_keys:
            known = derivations.get(key.pubkey)
            hashes = (*(() if known is None else known.leaf_hashes), *leaves.get(key.pubkey, ()))
            derivations[key.pubkey] = TapKeyOrigin(tuple(dict.fromkeys(hashes)), _origin(key))
        return {
            "tap_internal_key": internal.pubkey,
            "tap_merkle_root": merkle_root,
            "tap_bip32_derivations": derivations,
        }
    redeem, witness = descriptor.spend_scripts(derived.index, derived.branch.path)
    return {
        "redeem_script": redeem,
        "witness_script": witness,
        "bip32_derivations": {key.pubkey: _origin(key) for key in derived.keys},
    }


def _is_segwit(derived: DerivedAddress) -> bool:
    descriptor = derived.branch.descriptor
    inner = descriptor.inner
    return descriptor.function in ("wpkh", "wsh", "tr") or (inner is not None and inner.function in ("wpkh", "wsh"))


def psbt_input(source: _Source, previous: bytes | None) -> PsbtInput:
    """The Updater's input map of one coin (module docstring)."""
    derived = source.derived
    witness_utxo = TxOut(source.coin.value, derived.script_pubkey) if _is_segwit(derived) else None
    return PsbtInput(non_witness_utxo=previous, witness_utxo=witness_utxo, **_key_fields(derived))


def psbt_output(derived: DerivedAddress) -> PsbtOutput:
    """The Updater's output map of a destination address: its keys' origins and scripts (a
    destination ``tr()`` has no script tree: ``plan`` refuses one)."""
    fields = _key_fields(derived)
    fields.pop("tap_merkle_root", None)
    return PsbtOutput(**fields)


class MigrationPlanService:
    """Plans over the descriptor scans and the environment's Bitcoin source."""

    def __init__(self, scans: DescriptorScanService, observer: ChainObserver) -> None:
        self._scans = scans
        self._observer = observer

    async def plan(
        self,
        principal: Principal,
        source: str,
        destination: str,
        fee_rate: float | None,
        max_per_address_sat: int,
        gap_limit: int,
    ) -> dict[str, Any]:
        """The answer of ``POST /v1/plan/migration`` (fields in docs/api.md). Errors as for a
        descriptor scan, plus ``InvalidRequest`` for a destination that is not one ranged
        descriptor or a plan the coins cannot make (a cap or fee rate out of range)."""
        env, wallet = self._scans.wallet(principal, source, "bitcoin")
        target = parse_wallet(destination, env.network)
        if target.descriptors[0].function == "tr" and target.descriptors[0].tree is not None:
            raise InvalidRequest(
                "a destination tr() with a script tree is not supported: its outputs' PSBT fields would need "
                "the tree (PSBT_OUT_TAP_TREE); use a key-path tr() or another script type",
                field="destination",
            )
        if len(target.descriptors) != 1 or not target.descriptors[0].ranged:
            raise InvalidRequest(
                "destination must be one ranged descriptor (or a ypub/zpub): a bare xpub names four script types",
                field="destination",
            )
        client = self._observer.client(env, Chain.BITCOIN)
        if not isinstance(client, PlanSource):
            raise InvalidRequest("the configured Bitcoin source gives no fee estimates or transactions")
        try:
            sizes = {id(d): input_size(d) for d in wallet.descriptors}
        except UnplannableInput as exc:
            raise InvalidRequest(str(exc), field="descriptor") from None
        walk = await self._scans.walk(env, wallet.branches(), gap_limit)
        verdicts, _, index = await self._scans.verdicts(env, walk)
        coverage = wallet_coverage(walk, verdicts, index, gap_limit, MAX_DERIVED)
        sources = [
            _Source(
                Coin(
                    c.txid,
                    c.vout,
                    c.value,
                    v.derived.script_pubkey,
                    sizes[id(v.derived.branch.descriptor)],
                    exposure_rank(v.observation),
                    v.derived.branch.path,
                    v.derived.index,
                ),
                v.derived,
                v.observation.exposure.value,
            )
            for v in verdicts
            for c in v.coins
        ]
        rate = fee_rate if fee_rate is not None else max(1.0, await client.fee_rate(FEE_TARGET_BLOCKS))
        receive = target.branches()[0]
        plan, paid = await self._fresh_plan(env, receive, sources, rate, max_per_address_sat, gap_limit)
        by_outpoint = {s.coin.outpoint: s for s in sources}
        needing_previous = sorted(
            {
                c.txid
                for step in plan.steps
                for c in step.inputs
                if by_outpoint[c.outpoint].derived.branch.descriptor.function != "tr"
            }
        )
        previous = dict(
            zip(needing_previous, await asyncio.gather(*(client.transaction(t) for t in needing_previous)), strict=True)
        )
        steps = []
        for step in plan.steps:
            created = create_psbt(
                [(c.txid, c.vout, _REPLACEABLE) for c in step.inputs],
                [TxOut(p.value, p.destination.script_pubkey) for p in step.outputs],
            )
            inputs = [by_outpoint[c.outpoint] for c in step.inputs]
            psbt = Psbt(
                created.unsigned_tx,
                tuple(psbt_input(s, previous.get(s.coin.txid)) for s in inputs),
                tuple(psbt_output(paid[p.destination.address]) for p in step.outputs),
            )
            steps.append(
                {
                    "order": step.order,
                    "inputs": [
                        {
                            "txid": s.coin.txid,
                            "vout": s.coin.vout,
                            "valueSat": s.coin.value,
                            "address": str(s.derived.address),
                            "exposure": s.exposure,
                        }
                        for s in inputs
                    ],
                    "outputs": [
                        {
                            "address": p.destination.address,
                            "valueSat": p.value,
                            "index": paid[p.destination.address].index,
                        }
                        for p in step.outputs
                    ],
                    "vsize": step.vsize,
                    "feeSat": step.fee_sat,
                    "psbt": encode_psbt(psbt),
                }
            )
        return {
            "descriptors": [d.canonical() for d in wallet.descriptors],
            "destination": target.descriptors[0].canonical(),
            "feeRate": rate,
            "maxPerAddressSat": max_per_address_sat,
            "steps": steps,
            "skipped": [
                {
                    "txid": s.coin.txid,
                    "vout": s.coin.vout,
                    "valueSat": s.coin.value,
                    "exposure": by_outpoint[s.coin.outpoint].exposure,
                    "reason": s.reason,
                }
                for s in plan.skipped
            ],
            "totals": {"inSat": plan.in_sat, "outSat": plan.out_sat, "feeSat": plan.fee_sat},
            "coverage": coverage.to_dict(),
            "exposureComplete": coverage.complete,
        }

    async def _fresh_plan(
        self,
        env: Environment,
        receive: WalletBranch,
        sources: Sequence[_Source],
        rate: float,
        cap: int,
        gap_limit: int,
    ) -> tuple[MigrationPlan, dict[str, DerivedAddress]]:
        """A plan whose every destination has no history: the destination branch is walked
        to its gap, the plan starts after its last used address, and the addresses it pays
        are looked up; a used one found there is passed over and the plan made again."""
        used: set[int] = set()
        walk = await self._scans.walk(env, [receive], gap_limit)
        used.update(d.index for d, _ in walk.used)
        checked = {d.index for d in walk.derived}
        start = max(used, default=-1) + 1
        for _ in range(_FRESHNESS_ATTEMPTS):
            offered: dict[str, DerivedAddress] = {}
            plan = plan_migration(
                [s.coin for s in sources], _destinations(receive, start, used, offered, env), rate, cap
            )
            paid = {p.destination.address: offered[p.destination.address] for s in plan.steps for p in s.outputs}
            unchecked = [d for d in paid.values() if d.index not in checked]
            if not unchecked:
                return plan, paid
            observations = await self._observer.observe(env, Chain.BITCOIN, [d.address for d in unchecked])
            checked.update(d.index for d in unchecked)
            found = {d.index for d, o in zip(unchecked, observations, strict=True) if o.has_activity}
            if not found:
                return plan, paid
            used |= found
        raise InvalidRequest(
            "the destination wallet's fresh addresses keep turning out used: scan it and give a descriptor "
            "whose receive branch has room",
            field="destination",
        )


def _destinations(
    branch: WalletBranch, start: int, used: set[int], offered: dict[str, DerivedAddress], env: Environment
) -> Iterator[Destination]:
    """Fresh addresses of ``branch`` from ``start`` on, skipping ``used`` ones, recording each
    one offered (the plan reads them lazily)."""
    index = start
    while True:
        if index not in used:
            (derived,) = derive(branch, [index], env.network)
            offered[str(derived.address)] = derived
            yield Destination(derived.script_pubkey, str(derived.address))
        index += 1
