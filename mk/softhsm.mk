# SoftHSM2, the embedded PKCS#11 token behind managed custody (docs/custody.md).
# Included from the Makefile. `make run` needs only the package (the server creates
# its token under $(DATA_DIR)/softhsm on first start); `make test` also gets a
# throw-away token that every test process and test server shares through
# SOFTHSM2_CONF. Tests that need SoftHSM2 skip, with the reason, when it is missing.
#
# Wiring (in the Makefile, after PY is defined):
#   run: install softhsm
#   test: install-test softhsm-test-token
#   	$(SOFTHSM_TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

SOFTHSM_MODULE ?= /usr/lib/softhsm/libsofthsm2.so
SOFTHSM_TEST_DIR ?= $(CURDIR)/.softhsm-test
SOFTHSM_TEST_ENV = SOFTHSM2_CONF=$(SOFTHSM_TEST_DIR)/softhsm2.conf

.PHONY: softhsm softhsm-token softhsm-test-token

softhsm:  ## install SoftHSM2 (Debian package softhsm2) when softhsm2-util or the module is missing
	@if command -v softhsm2-util >/dev/null 2>&1 && test -f $(SOFTHSM_MODULE); then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "softhsm2 is missing and this user cannot install packages: apt-get install softhsm2" >&2; exit 1; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq softhsm2 >/dev/null; \
	test -f $(SOFTHSM_MODULE) || { echo "softhsm2 installed but $(SOFTHSM_MODULE) is missing" >&2; exit 1; }

softhsm-token: softhsm install  ## create (idempotently) a token and its wrapping key under SOFTHSM_DIR=<dir>
	@test -n "$(SOFTHSM_DIR)" || { echo "usage: make softhsm-token SOFTHSM_DIR=<dir>" >&2; exit 2; }
	$(PY) -m services.custody.softhsm_cli init --module $(SOFTHSM_MODULE) $(SOFTHSM_DIR)

softhsm-test-token: softhsm install  ## a fresh throw-away token for the test suite under SOFTHSM_TEST_DIR
	rm -rf $(SOFTHSM_TEST_DIR)
	$(PY) -m services.custody.softhsm_cli init --module $(SOFTHSM_MODULE) $(SOFTHSM_TEST_DIR)
