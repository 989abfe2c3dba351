"""The dashboard served at ``/`` (issue 20): pages, charts, the cookie session and its CSRF
defences. Importing the package registers every page on ``dashboard`` (``api.dashboard.frame``)."""

from api.dashboard import (  # noqa: F401  (importing a module registers its pages)
    account,
    alerts,
    attestations,
    chains,
    detail,
    managed,
    portfolio,
    public_keys,
    signin,
    wallets,
)
from api.dashboard.frame import dashboard

__all__ = ["dashboard"]
