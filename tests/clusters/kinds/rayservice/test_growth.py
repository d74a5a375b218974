"""What a service asks to grow by: the GPUs of the replicas Ray Serve waits to schedule,
read from its deployments' status messages as KubeRay copies them."""

from __future__ import annotations

from clusters.kinds.rayservice.growth import unscheduled_gpus


def test_the_gpus_serve_waits_for_are_read_from_its_deployments_messages() -> None:
    waiting = (
        "Deployment 'Model' in application 'model' has 2 replicas that have taken more than "
        "30s to be scheduled. This may be due to waiting for the cluster to auto-scale or "
        "for a runtime environment to be installed. Resources required for each replica: "
        "{'CPU': 0.0, 'GPU': 1.0}."
    )
    apps = {
        "model": {"deployments": {"Model": {"status": "UPDATING", "message": waiting}}},
        "other": {"deployments": {"Ingress": {"status": "HEALTHY", "message": ""}}},
    }
    assert unscheduled_gpus(apps) == 2
    cpu_only = waiting.replace("'GPU': 1.0", "'GPU': 0.0")
    assert unscheduled_gpus({"m": {"deployments": {"M": {"message": cpu_only}}}}) == 0
    assert unscheduled_gpus({}) == 0
