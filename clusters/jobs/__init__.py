"""Batch jobs: RayJobs that wait in the cluster queue, run their driver and give their
GPUs back when it ends (DESIGN "States"; the seeds' Kueue gang-scheduling guide).

A job is a :class:`clusters.models.ClusterRequest` with ``workload`` ``job`` plus a
:class:`clusters.models.Job` row: the shape, queue, admission and quota ledger are the
clusters' own, so the queue has one order and one set of rules for both. What is a
job's own lives here: the request body beyond the shape (:mod:`.spec`), the checks of
``runtime_env`` (:mod:`.runtime_env`) and reading the driver's logs (:mod:`.logs`); the
services are :mod:`clusters.requests.jobs`, the engine's part :mod:`clusters.engine.jobs`.
"""
