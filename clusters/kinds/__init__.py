"""Workload kinds: one package per kind, found through a registry."""
