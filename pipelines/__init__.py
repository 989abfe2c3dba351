"""qday pipelines: Dagster assets that rescore every watched address daily.

``definitions`` is the code location (``pipelines.definitions:defs``); ``assets`` the
chain × day partitioned assets and their checks; ``automation`` the jobs, schedules and
sensors; ``resources`` the swappable chain-data, price, operational-store
and analytics resources; ``rescore`` the Dagster-free streaming steps; ``families`` the
key families and their linkage (a key exposed anywhere marks all its addresses); ``sources`` the
real and replayed data sources; ``cli`` the ``qday sql``/``watch import``/``up``
commands; ``supervisor`` the process supervisor of ``qday up``. See docs/analytics.md.
"""
