# Coverage-guided fuzzing (atheris/libFuzzer) of the parsers, one harness per fuzz/fuzz_*.py.
# Included from the Makefile. `make fuzz` runs each harness for FUZZ_SECONDS; the corpus it
# grows and any crash reproducer stay under FUZZ_OUT (inside the git-ignored data folder).
# A short run of every harness is part of `make test` (tests/security/test_fuzz_smoke.py).

FUZZ_SECONDS ?= 300
FUZZ_MAX_LEN ?= 8192
FUZZ_OUT ?= $(DATA_DIR)/fuzz
FUZZ_HARNESSES := $(patsubst fuzz/fuzz_%.py,%,$(wildcard fuzz/fuzz_*.py))

.PHONY: fuzz

fuzz: install-test  ## run every fuzz harness for FUZZ_SECONDS each (default 300); crashes land in FUZZ_OUT/crashes
	@for h in $(FUZZ_HARNESSES); do \
	  echo "== fuzz $$h: $(FUZZ_SECONDS) s"; \
	  FUZZ_CORPUS_DIR=$(FUZZ_OUT)/corpus FUZZ_ARTIFACTS=$(FUZZ_OUT)/crashes \
	    $(PY) -m fuzz.fuzz_$$h -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) -print_final_stats=1 \
	    2> >(grep -v '^INFO: Instrumenting' >&2) || exit 1; \
	done
