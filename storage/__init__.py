"""Operational state: accounts, API keys and everything the API serves from.

The API, the admin CLI and the pipelines all reach it through the ``Store``
interface in ``storage.repository``; ``storage.sqlite`` is the embedded
implementation (SQLite in WAL mode, safe for several processes).
"""
