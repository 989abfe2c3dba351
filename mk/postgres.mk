# PostgreSQL, the second engine of the operational store (SQLite stays the default).
# Included from the Makefile. Only the server's programs are needed: the tests and
# benchmarks start their own throw-away server from Debian's
# /usr/lib/postgresql/<version>/bin (tests/postgres.py), and the tests that need it skip,
# with the reason, when it is missing.
#
# Wiring (in the Makefile):
#   test: install-test postgres
#   bench: install-test postgres

.PHONY: postgres

postgres:  ## install PostgreSQL (Debian package postgresql) when no /usr/lib/postgresql/*/bin/initdb exists
	@if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "postgresql is missing and this user cannot install packages: apt-get install postgresql" >&2; exit 1; fi; \
	{ $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; } \
	|| { echo "could not install postgresql (as root: apt-get install postgresql)" >&2; exit 1; }; \
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null \
	|| { echo "postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2; exit 1; }

PG_PORT ?= 5433

.PHONY: run-pg

run-pg: install postgres softhsm  ## two API nodes (PORT, PORT+1) and Dagster on one local PostgreSQL (PG_PORT, 5433): docs/deployment.md
	$(PY) -m cli.local_cluster --data-dir $(DATA_DIR) --port $(PORT) --pg-port $(PG_PORT) --dagster-port $(DAGSTER_PORT)
