"""Coverage-guided fuzz harnesses (atheris/libFuzzer), one per parser family.

Each ``fuzz/fuzz_<family>.py`` holds ``test_one_input(data)``, which feeds the bytes to a
parser and lets only two outcomes pass: a valid value (with its round-trip property, where
one exists) or the parser's documented domain error. Anything else raises and libFuzzer
reports a crash. Run one with ``python -m fuzz.fuzz_hex -runs=1000`` or all with
``make fuzz``; ``tests/security/test_fuzz_smoke.py`` runs each briefly in ``make test``.
"""
