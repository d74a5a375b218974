"""Serve configs for the service tests, shaped as KubeRay's v1.7.0 samples shape them
(``ray-service.stable-diffusion.yaml``: an ingress and a one-GPU model deployment)."""

from typing import Any

STABLE_DIFFUSION = """\
applications:
  - name: stable_diffusion
    import_path: stable_diffusion.stable_diffusion:entrypoint
    route_prefix: /
    runtime_env:
      working_dir: "https://github.com/ray-project/serve_config_examples/archive/master.zip"
    deployments:
      - name: APIIngress
        num_replicas: 1
      - name: StableDiffusionV2
        num_replicas: 1
        ray_actor_options:
          num_gpus: 1
"""

AUTOSCALING = """\
applications:
  - name: echo
    import_path: echo:app
    route_prefix: /echo
    deployments:
      - name: Echo
        ray_actor_options:
          num_cpus: 0.5
        autoscaling_config:
          min_replicas: 1
          max_replicas: 3
"""


def queued_service(tenant: Any, owner: Any, name: str = "sd", **fields: Any) -> Any:
    """A service row of the tenant, queued on one l4 GPU with the Stable Diffusion config,
    written straight to the database (no worker admits it unless one runs)."""
    from clusters.models import ClusterRequest, Service
    from tenants.models import GpuFlavor

    row = ClusterRequest.objects.create(
        tenant=tenant,
        name=name,
        owner=owner,
        workload="service",
        kind="dev",
        flavor=GpuFlavor.objects.get(name="l4"),
        workers=1,
        gpus=1,
        state="queued",
        **fields,
    )
    Service.objects.create(request=row, serve_config=STABLE_DIFFUSION)
    return row
