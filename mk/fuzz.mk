# Fuzzing, long form. Included from the Makefile. `make fuzz` runs
#  1. every coverage-guided harness (atheris/libFuzzer, fuzz/fuzz_*.py) for FUZZ_SECONDS each;
#     the corpus it grows and any crash reproducer stay under FUZZ_OUT (git-ignored data folder);
#  2. schemathesis against a real server: FUZZ_API_EXAMPLES valid and as many invalid requests
#     per operation, and stateful scenarios along the OpenAPI links (tests/security/test_api_fuzz.py).
# `make test` runs a short form of both (tests/security/test_fuzz_smoke.py, the stateful test at
# its default size, tests/api/test_schemathesis.py).

FUZZ_SECONDS ?= 300
FUZZ_MAX_LEN ?= 8192
FUZZ_API_EXAMPLES ?= 100
FUZZ_OUT ?= $(DATA_DIR)/fuzz
FUZZ_HARNESSES := $(patsubst fuzz/fuzz_%.py,%,$(wildcard fuzz/fuzz_*.py))

.PHONY: fuzz fuzz-parsers fuzz-api

fuzz: fuzz-parsers fuzz-api  ## long fuzzing: every parser harness FUZZ_SECONDS each (default 300), then schemathesis at FUZZ_API_EXAMPLES per operation

fuzz-parsers: install-test  ## the atheris harnesses only; crashes land in FUZZ_OUT/crashes
	@for h in $(FUZZ_HARNESSES); do \
	  echo "== fuzz $$h: $(FUZZ_SECONDS) s"; \
	  FUZZ_CORPUS_DIR=$(FUZZ_OUT)/corpus FUZZ_ARTIFACTS=$(FUZZ_OUT)/crashes \
	    $(PY) -m fuzz.fuzz_$$h -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) -print_final_stats=1 \
	    2> >(grep -v -e '^INFO: Instrumenting' -e '^WARNING: Failed to find function' >&2) || exit 1; \
	done

fuzz-api: install-test  ## schemathesis at scale (stateless, every operation) and stateful, against a real server
	QDAY_FUZZ_EXAMPLES=$(FUZZ_API_EXAMPLES) $(PY) -m pytest tests/security/test_api_fuzz.py -q -s -p no:cacheprovider
