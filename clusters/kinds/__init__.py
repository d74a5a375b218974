"""Workload kinds: one package per kind of request (the registry comes with the re-cut)."""
