"""The HTTP API: a Sanic app that maps requests onto the domain packages."""
