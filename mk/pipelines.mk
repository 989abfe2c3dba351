# Pipelines and analytics (docs/analytics.md). Included from the Makefile after the
# variables it defines (VENV, PY, DATA_DIR, PORT, DAGSTER_PORT) and after mk/anvil.mk (bench-rescore needs anvil).

API_PORT ?= $(PORT)
RESCORE_CHAINS ?= ethereum bitcoin solana base arbitrum optimism polygon zksync linea scroll mantle blast sonic gnosis celo bsc avalanche cosmos tron
RESCORE_DATE ?= $(shell date -u +%Y-%m-%d)

.PHONY: up sql rescore test-pipelines bench-rescore

up: install  ## API + Dagster webserver (127.0.0.1:DAGSTER_PORT) + daemon, supervised; Ctrl-C stops all
	$(VENV)/bin/qday up --data-dir $(DATA_DIR) --port $(API_PORT) --dagster-port $(DAGSTER_PORT)

sql: install  ## DuckDB shell over the analytics tables of $(DATA_DIR)
	$(VENV)/bin/qday sql --data-dir $(DATA_DIR)

rescore: install  ## rescore RESCORE_CHAINS for RESCORE_DATE (default today) now, without the daemon
	@mkdir -p $(DATA_DIR)/dagster && cp dagster_home/dagster.yaml $(DATA_DIR)/dagster/dagster.yaml
	@# two passes: every chain is observed before any is scored, so each address is linked
	@# with its key family's observations on the other chains (pipelines/families.py)
	@for phase in watched_addresses,family_targets,chain_observations,key_exposure,native_prices \
	              address_risk,published_scan_results; do \
	  for chain in $(RESCORE_CHAINS); do \
	    echo "== $$chain|$(RESCORE_DATE): $$phase"; \
	    QDAY_DATA_DIR=$(DATA_DIR) DAGSTER_HOME=$(abspath $(DATA_DIR))/dagster $(VENV)/bin/dagster asset materialize \
	      -m pipelines.definitions -a defs --select "$$phase" --partition "$$chain|$(RESCORE_DATE)" \
	      || echo "!! $$chain failed (see above); other chains go on"; \
	  done; \
	done

test-pipelines: install-test  ## the pipeline tests only (anvil tests skip without `make anvil`)
	$(PY) -m pytest tests/pipelines $(PYTEST_ARGS)

bench-rescore: install-test $(ANVIL)  ## watched addresses rescored per second against anvil, and peak memory
	$(PY) -m bench.bench_rescore
