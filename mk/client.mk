# The client SDK (client/, distribution qday-client): `make client-wheel` builds its
# wheel, which carries the repository's pure pqc/ package, into dist/.
.PHONY: client-wheel

client-wheel: $(UV)  ## build the qday-client wheel into dist/
	$(UV) build --quiet --wheel --out-dir dist client
