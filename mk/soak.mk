# The load/soak run (bench/soak.py): a mixed workload at a steady rate against a real
# `qday serve` on 127.0.0.1 and anvil, bounded in time and count. Included from the Makefile;
# a 20 s version runs inside `make test` (tests/reliability/test_soak_smoke.py).

SOAK_RATE ?= 10
SOAK_SECONDS ?= 300
SOAK_WORKERS ?= 1

.PHONY: soak

soak: install-test anvil softhsm  ## mixed workload for SOAK_SECONDS at SOAK_RATE req/s: p50/p99 per endpoint, errors, RSS slope
	$(PY) -m bench.soak --rate $(SOAK_RATE) --seconds $(SOAK_SECONDS) --workers $(SOAK_WORKERS)
