"""Bitcoin consensus data without I/O.

Scripts and output types, raw transactions and blocks, what spends reveal, and the draft
BIP's public-key exposure levels.
"""
