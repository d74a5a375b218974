"""`make reliability`: fault, load and abuse suites against the real stack.

Each suite is a module with ``run(quick: bool) -> str`` returning one markdown section of
``docs/reliability.md``. The full runs are for the document; ``quick=True`` is the few
iterations the same code does inside ``make test`` (see ``tests/reliability/``).
"""
