"""The results store: immutable records, their schema upgrades and the SQLite file.

The bottom of the results layers: it imports no bench code (tests/unit/test_module_graph.py).
"""
