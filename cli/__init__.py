"""The one ``qday`` command: serve, admin, sql, watch import, up."""
