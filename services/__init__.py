"""Application services: the rules of accounts, API keys, post-quantum keys,
attestations, scans and the watch list, and managed custody. Free of HTTP and of
Dagster; every entry point (``api``, ``pipelines``, ``cli``) calls these."""
