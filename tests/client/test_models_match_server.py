"""The client's typed results mirror the server's response models (the client
cannot import them: it installs without the server). This keeps the two equal:
every endpoint's response model, nested models included, has a client model
with the same wire field names."""

from __future__ import annotations

import importlib
import typing

import msgspec
import pytest

from qday_client import models

ROUTE_MODULES = ("accounts", "attestations", "keys", "managed", "scans", "service", "webhooks")
#: Server response model name -> client result model.
MIRRORS = {
    "HealthOut": models.Health,
    "ReadyOut": models.Ready,
    "WebhookOut": models.Webhook,
    "WebhookWithSecretOut": models.WebhookWithSecret,
    "AttemptOut": models.DeliveryAttempt,
    "DeliveryOut": models.Delivery,
    "TestSentOut": models.WebhookPing,
    "SigningKeyOut": models.SigningKey,
    "AccountOut": models.Account,
    "LoginOut": models.Login,
    "SessionUser": models.SessionUser,
    "ApiKeyCreatedOut": models.CreatedApiKey,
    "ApiKeyOut": models.ApiKey,
    "RotatedKeyOut": models.RotatedApiKey,
    "StatementOut": models.Statement,
    "AttestationOut": models.Attestation,
    "VerificationOut": models.Verification,
    "GeneratedKeyOut": models.GeneratedKey,
    "ManagedKeyOut": models.ManagedKey,
    "RegistrationChallengeOut": models.RegistrationChallenge,
    "PqKeyOut": models.PqKey,
    "ManagedSignatureOut": models.ManagedSignature,
    "ManagedKeyEventOut": models.KeyEvent,
    "UsageOut": models.Usage,
    "KeyUsageOut": models.KeyUsage,
    "WalletScanOut": models.WalletScan,
    "WalletScanResult": models.WalletScanResult,
    "ExposureEvidenceOut": models.ExposureEvidence,
    "CoverageOut": models.Coverage,
    "KeyScanOut": models.KeyScan,
    "KeyAddressOut": models.KeyAddress,
    "ScanErrorOut": models.ScanError,
    "RiskFactorOut": models.RiskFactor,
    "ChainFactorOut": models.ChainFactor,
    "DetectOut": models.Detection,
    "WatchedOut": models.Watched,
    "DescriptorScanOut": models.DescriptorScan,
    "DescriptorSummaryOut": models.DescriptorSummary,
    "WalletAddressOut": models.WalletAddress,
    "CoinOut": models.Coin,
    "ExposedUnusedOut": models.ExposedUnused,
    "WalletSummaryOut": models.WalletSummary,
    "ExposureTotalOut": models.ExposureTotal,
    "MigrationPlanOut": models.MigrationPlan,
    "PlanStepOut": models.PlanStep,
    "PlanInputOut": models.PlanInput,
    "PlanOutputOut": models.PlanOutput,
    "PlanSkippedOut": models.PlanSkipped,
    "PlanTotalsOut": models.PlanTotals,
    "WatchedDescriptorOut": models.WatchedDescriptor,
}


def _structs(annotation: object) -> set[type]:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return {annotation}
    return {s for arg in typing.get_args(annotation) for s in _structs(arg)}


def _response_models() -> set[type]:
    found: set[type] = set()
    pending = set()
    for name in ROUTE_MODULES:
        for endpoint in importlib.import_module(f"api.routes.{name}").group.endpoints:
            pending |= _structs(endpoint.response)
    while pending:
        model = pending.pop()
        found.add(model)
        hints = typing.get_type_hints(model, include_extras=True)
        pending |= {s for f in msgspec.structs.fields(model) for s in _structs(hints[f.name])} - found
    return found


def _wire_names(model: type) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(model)}


def test_every_server_response_model_has_a_client_mirror():
    assert {m.__name__ for m in _response_models()} == set(MIRRORS)


@pytest.mark.parametrize("server_model", sorted(_response_models(), key=lambda m: m.__name__), ids=lambda m: m.__name__)
def test_client_model_has_the_same_wire_fields(server_model):
    client_model = MIRRORS[server_model.__name__]
    assert _wire_names(client_model) == _wire_names(server_model)
    assert client_model.__struct_config__.tag == server_model.__struct_config__.tag
