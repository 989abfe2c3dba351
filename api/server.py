"""Starting the API server (one or several worker processes)."""

from __future__ import annotations

from functools import partial

from sanic import Sanic
from sanic.worker.loader import AppLoader

from api.app import create_app
from api.settings import Settings


def serve(settings: Settings) -> None:
    """Run the API until interrupted; workers are spawned processes, each with
    its own store connection."""
    loader = AppLoader(factory=partial(create_app, settings))
    app = loader.load()
    app.prepare(
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        single_process=settings.workers == 1,
        access_log=settings.access_log,
        motd=False,
    )
    Sanic.serve(primary=app, app_loader=loader)
