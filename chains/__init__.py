"""Chain knowledge: address codecs, exposure classification and async chain clients."""
