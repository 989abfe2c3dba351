# anvil, Foundry's local EVM node, for the chain-client tests and `make devnet`.
# Included from the Makefile. The binary comes from npm (Foundry's per-platform package)
# into .tools/; the tests find it there, or at $(QDAY_ANVIL), and skip without it.

ANVIL_VERSION := 1.7.1
ANVIL_PACKAGE := @foundry-rs/anvil-linux-amd64
ANVIL := .tools/node_modules/$(ANVIL_PACKAGE)/bin/anvil
DEVNET_HOST ?= 127.0.0.1
DEVNET_PORT ?= 8545
DEVNET_CHAIN_ID ?= 31337
DEVNET_ACCOUNTS ?= 10

.PHONY: anvil devnet

$(ANVIL):
	npm install --no-save --no-audit --no-fund --prefix .tools $(ANVIL_PACKAGE)@$(ANVIL_VERSION)
	@test -x $@ || { echo "anvil missing at $@ after npm install" >&2; exit 1; }

anvil: $(ANVIL)  ## install anvil $(ANVIL_VERSION) into .tools/ (once; nothing to do when present)

devnet: $(ANVIL) install  ## anvil on 127.0.0.1:8545 (funded dev accounts printed) + the API with every EVM chain pointed at it; Ctrl-C stops both
	@set -m; $(ANVIL) --host $(DEVNET_HOST) --port $(DEVNET_PORT) --chain-id $(DEVNET_CHAIN_ID) --accounts $(DEVNET_ACCOUNTS) & \
	anvil_pid=$$!; trap 'kill $$anvil_pid 2>/dev/null' EXIT INT TERM; \
	$(VENV)/bin/qday serve --config mk/devnet.toml
