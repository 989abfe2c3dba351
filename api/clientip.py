"""The client address that rate limits count against."""

from __future__ import annotations


def client_ip(peer: str, forwarded_for: str | None, trusted_proxies: tuple[str, ...]) -> str:
    """The peer address, or, when the peer is a trusted proxy, the nearest
    untrusted address of ``X-Forwarded-For`` (so clients cannot spoof it)."""
    if not forwarded_for or peer not in trusted_proxies:
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if hop not in trusted_proxies:
            return hop
    return peer
