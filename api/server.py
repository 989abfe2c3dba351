"""Starting the API server (one or several worker processes)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from sanic import Sanic
from sanic.worker.loader import AppLoader

from api.app import create_app
from api.protocol import DeadlineHttpProtocol
from services.settings import load_settings


def _app_from_settings(config_file: Path | None, overrides: dict[str, Any]) -> Sanic:
    # Each spawned worker rebuilds the settings from the same inputs (the environment
    # is inherited), so nothing unpicklable crosses the process boundary.
    return create_app(load_settings(config_file=config_file, **overrides))


def serve(config_file: Path | None = None, **overrides: Any) -> None:
    """Run the API until interrupted. One worker serves in this process; more are
    spawned processes, each with its own store connection (Sanic's worker manager
    would otherwise add a manager and a spawned worker even for one: ~200 MB more
    memory and a second start-up). Settings come from the environment,
    ``config_file`` and ``overrides`` (validated here first, so bad values stop
    start-up at once)."""
    settings = load_settings(config_file=config_file, **overrides)
    loader = AppLoader(factory=partial(_app_from_settings, config_file, overrides))
    app = loader.load()
    app.prepare(
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        single_process=settings.workers == 1,
        access_log=settings.access_log,
        motd=False,
        protocol=DeadlineHttpProtocol,
    )
    if settings.workers == 1:
        Sanic.serve_single(primary=app)
    else:
        Sanic.serve(primary=app, app_loader=loader)
