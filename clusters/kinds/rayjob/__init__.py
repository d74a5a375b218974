"""The RayJob kind: a batch job whose Ray cluster lives as long as its driver."""
