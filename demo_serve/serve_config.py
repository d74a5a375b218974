"""The demo service's Serve config (serveConfigV2): what ``make run`` requests
(``seed_demo_service``) and the new-service form's example. Shaped as KubeRay's
StableDiffusion sample, with this package's stand-in model."""

SERVE_CONFIG = """\
applications:
  - name: text_to_image
    import_path: demo_serve.text_to_image:entrypoint
    route_prefix: /
    deployments:
      - name: APIIngress
        num_replicas: 1
      - name: StableDiffusionV2
        ray_actor_options:
          num_gpus: 1
        autoscaling_config:
          min_replicas: 1
          max_replicas: 2
"""
