"""Benchmarks run by ``make bench`` (``python -m benchmarks``); see ``__main__``."""
