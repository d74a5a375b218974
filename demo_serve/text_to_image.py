"""A "text-to-image" Serve application small enough for a CPU, shaped as KubeRay's
StableDiffusion sample (``ray-service.stable-diffusion.yaml``): an ``APIIngress``
deployment (``GET /imagine?prompt=...&img_size=...``; a plain Starlette handler where the
sample uses FastAPI, whose current releases Ray 2.49's ``serve.ingress`` cannot pickle)
that calls a model deployment ``StableDiffusionV2`` with ``ray_actor_options: {num_gpus: 1}``.

No model is loaded: the "image" is a PNG of ``img_size`` pixels square whose colours come
from a hash of the prompt, so the same prompt gives the same picture. On kubesim's real
Ray heads the GPU is a logical resource (the worker pod's ``nvidia.com/gpu``), so the
model replica schedules on a GPU worker without any GPU. Import path:
``demo_serve.text_to_image:entrypoint``.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import Response

MAX_SIZE = 256


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def render(prompt: str, size: int) -> bytes:
    """A ``size``x``size`` RGB PNG: horizontal bands in colours derived from the prompt."""
    digest = hashlib.sha256(prompt.encode()).digest()
    colours = [digest[i : i + 3] for i in range(0, 30, 3)]
    rows = b"".join(b"\x00" + colours[y * len(colours) // size] * size for y in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
    )


@serve.deployment(num_replicas=1)
class APIIngress:
    """The HTTP face: validates the query and asks the model for the picture."""

    def __init__(self, diffusion_model_handle: DeploymentHandle) -> None:
        self.handle = diffusion_model_handle

    async def __call__(self, request: Request) -> Response:
        if request.url.path.rstrip("/") != "/imagine":
            return Response("Not Found: try /imagine?prompt=...", status_code=404)
        prompt = request.query_params.get("prompt", "")
        try:
            img_size = int(request.query_params.get("img_size", "64"))
        except ValueError:
            return Response("img_size must be an integer", status_code=400)
        if not prompt.strip():
            return Response("prompt must not be empty", status_code=400)
        if not 1 <= img_size <= MAX_SIZE:
            return Response(f"img_size must be between 1 and {MAX_SIZE}", status_code=400)
        image = await self.handle.generate.remote(prompt, img_size=img_size)
        return Response(content=image, media_type="image/png")


@serve.deployment(
    ray_actor_options={"num_gpus": 1},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2},
)
class StableDiffusionV2:
    """The "model": deterministic pictures, no weights (a stand-in for the sample's
    diffusers pipeline)."""

    def generate(self, prompt: str, img_size: int = 64) -> bytes:
        return render(prompt, img_size)


# ``@serve.deployment`` makes each class a Deployment, which mypy cannot see on a class.
entrypoint = APIIngress.bind(StableDiffusionV2.bind())  # type: ignore[attr-defined]
