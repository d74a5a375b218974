"""Emulated operators: KubeRay (always on) and Kueue (with ``kueue=True``)."""
