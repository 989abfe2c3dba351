"""Settings of the pipeline tests. Their fixtures (``data_dir``, ``today``, ``esplora``,
``snapshot_world`` …) come from the ``tests.pipelines.fixtures`` plugin, their helpers
from ``tests.pipelines.support``."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _quiet_dagster() -> None:
    logging.getLogger("dagster").setLevel(logging.WARNING)
