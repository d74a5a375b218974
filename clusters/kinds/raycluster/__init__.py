"""The RayCluster kind: an interactive Ray cluster of its own."""
