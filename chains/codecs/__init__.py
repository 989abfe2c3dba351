"""Address codecs of the five address families (EVM, Bitcoin, Solana, Cosmos, Tron).

``chains.codecs.detect.parse_address`` is the entry point; each family module holds its typed
address classes, and ``base58``/``bech32``/``hashes`` the encodings they are built on.
"""
