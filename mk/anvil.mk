# anvil, Foundry's local EVM node, for the chain-client tests and `make devnet`.
# Included from the Makefile. The binary comes from npm (Foundry's per-platform package)
# into .tools/; the tests find it there, or at $(QDAY_ANVIL), and skip without it.

ANVIL_VERSION := 1.7.1
ANVIL_PACKAGE := @foundry-rs/anvil-linux-amd64
ANVIL := .tools/node_modules/$(ANVIL_PACKAGE)/bin/anvil
DEVNET_PORT ?= $(or $(QDAY_ANVIL_PORT),8545)
DEVNET_DATA_DIR ?= $(DATA_DIR)/devnet
DEVNET_URL = http://127.0.0.1:$(DEVNET_PORT)
# Every EVM chain of both environments reads anvil (mk/devnet.toml gives their chain id,
# 31337); family lookups (scans and pipelines) stay on ethereum, so nothing calls a public
# endpoint unless asked to scan a non-EVM chain.
DEVNET_EVM_CHAINS := ETHEREUM BASE ARBITRUM OPTIMISM POLYGON ZKSYNC LINEA SCROLL MANTLE BLAST SONIC GNOSIS CELO BSC AVALANCHE
DEVNET_ENV = $(foreach c,$(DEVNET_EVM_CHAINS),QDAY_$(c)_RPC_URL=$(DEVNET_URL) QDAY_TEST_$(c)_RPC_URL=$(DEVNET_URL)) \
	QDAY_FAMILY_CHAINS=ethereum

.PHONY: anvil devnet

$(ANVIL):
	npm install --no-save --no-audit --no-fund --prefix .tools $(ANVIL_PACKAGE)@$(ANVIL_VERSION)
	@test -x $@ || { echo "anvil missing at $@ after npm install" >&2; exit 1; }

anvil: $(ANVIL)  ## install anvil $(ANVIL_VERSION) into .tools/ (once; nothing to do when present)

devnet: $(ANVIL) install softhsm  ## the whole stack (qday up: API, Dagster) on anvil (127.0.0.1:DEVNET_PORT, 8545; funded dev accounts printed), data under DEVNET_DATA_DIR; Ctrl-C stops all
	@$(DEVNET_ENV) $(VENV)/bin/qday up --config mk/devnet.toml --data-dir $(DEVNET_DATA_DIR) \
	  --port $(PORT) --dagster-port $(DAGSTER_PORT) --anvil $(ANVIL) --anvil-port $(DEVNET_PORT)
