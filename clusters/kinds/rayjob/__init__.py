"""Batch jobs: a RayJob that waits in the queue, runs its driver and gives its GPUs back."""
