"""Interactive Ray clusters: a RayCluster that runs until it is deleted or reclaimed."""
