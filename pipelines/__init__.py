"""qday pipelines: Dagster assets that rescore every watched address daily.

``definitions`` is the code location (``pipelines.definitions:defs``); ``assets`` the
chain × day partitioned assets and their checks; ``automation`` the jobs, schedules and
the new-address sensor; ``resources`` the swappable chain-data, price, operational-store
and analytics resources; ``rescore`` the Dagster-free streaming steps; ``sources`` the
real and replayed data sources; ``cli`` the ``qday sql``/``watch import``/``up``
commands; ``supervisor`` the process supervisor of ``qday up``. See docs/analytics.md.
"""
