"""qday client SDK: a typed async client of the qday API, local post-quantum
keys, local hybrid signing, checking signed webhook deliveries
(``verify_webhook``), and the ``qday-client`` command.

Private keys are made and used on this machine only; the client never sends
or logs them. See docs/quickstart.md.
"""

from qday_client.client import DEFAULT_API_URL, QdayClient
from qday_client.ecdsa_signer import EcdsaSigner, load_signer
from qday_client.errors import (
    AccountError,
    ApiError,
    ApiKeyError,
    AttestationError,
    AuthError,
    ConnectionFailed,
    CryptoError,
    CustodyError,
    KeyGenerationError,
    LocalError,
    PlanCapError,
    QdayError,
    RateLimitError,
    RequestError,
    ScanError,
    ServerError,
    WebhookVerificationError,
)
from qday_client.hybrid import attest, register_key
from qday_client.webhooks import WebhookEvent, verify_webhook

__all__ = [
    "DEFAULT_API_URL",
    "QdayClient",
    "EcdsaSigner",
    "load_signer",
    "attest",
    "register_key",
    "verify_webhook",
    "WebhookEvent",
    "QdayError",
    "ApiError",
    "AuthError",
    "ScanError",
    "CryptoError",
    "AttestationError",
    "KeyGenerationError",
    "RateLimitError",
    "AccountError",
    "ApiKeyError",
    "CustodyError",
    "PlanCapError",
    "RequestError",
    "ServerError",
    "ConnectionFailed",
    "LocalError",
    "WebhookVerificationError",
]
