"""What every layer shares and nothing else: the domain error base, identifiers, the clock."""
