"""Route groups of the HTTP API, one module per area of the spec."""
