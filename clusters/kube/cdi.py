"""Containers that see exactly their pod's GPUs: the ``container_gpus`` opt-in (pure).

Ray runs a runtime environment's container (``image_uri``) with podman in the worker
pod, and a node-wide CDI spec would show it every GPU of the node. So each GPU worker
gets an init container writing a CDI spec of exactly its GPUs into an ``emptyDir``,
which the Ray container's podman is pointed at (``CONTAINERS_CONF_OVERRIDE``), and what
rootless podman needs within Pod Security ``baseline`` (SETUID/SETGID, privilege
escalation, the Localhost seccomp profile): never privileged, never a hostPath.
docs/containers.md says what works, what does not, and why ``restricted`` refuses it.
"""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]

CDI_VOLUME = "gpu-cdi"
CDI_DIR = "/var/run/gangway-cdi"
CDI_SPEC_FILE = "nvidia-gpu.json"
CONTAINERS_CONF = "containers.conf"
INIT_CONTAINER = "gpu-cdi-spec"
# The init container only reads /proc and writes two small files.
INIT_CPU = "100m"
INIT_MEMORY = "128Mi"
# Capabilities rootless podman needs for newuidmap/newgidmap; both are in Pod Security
# baseline's allowed list.
PODMAN_CAPABILITIES = ["SETGID", "SETUID"]

# The init container's program: reads the GPUs the device plugin gave the pod
# (NVIDIA_VISIBLE_DEVICES, GPU UUIDs or indices), finds each one's device minor in
# /proc/driver/nvidia/gpus, and writes a CDI spec of only those devices plus a
# containers.conf that points podman at it. ``root`` (argv[2]) is for tests.
SCRIPT = """\
import glob, json, os, sys
out, root = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
given = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
gpus = [g.strip() for g in given.split(",") if g.strip()]
if not gpus or gpus[0] in ("all", "none", "void"):
    sys.exit(f"NVIDIA_VISIBLE_DEVICES={given!r}: expected this pod's GPUs from the device plugin")
minors = {}
for info in glob.glob(root + "/proc/driver/nvidia/gpus/*/information"):
    with open(info) as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    minor = fields["Device Minor"].strip()
    minors[fields["GPU UUID"].strip()] = minor
    minors[minor] = minor  # a device plugin set to hand out indices, not UUIDs
devices, nodes = [], []
for index, gpu in enumerate(gpus):
    if gpu not in minors:
        sys.exit(f"GPU {gpu} is not in {root}/proc/driver/nvidia/gpus")
    node = {"path": f"/dev/nvidia{minors[gpu]}"}
    nodes.append(node)
    devices.append({"name": str(index), "containerEdits": {"deviceNodes": [node]}})
devices.append({"name": "all", "containerEdits": {"deviceNodes": nodes}})
common = [{"path": p} for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
          if os.path.exists(root + p)]
spec = {"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": devices,
        "containerEdits": {"deviceNodes": common}}
with open(os.path.join(out, "nvidia-gpu.json"), "w") as f:
    json.dump(spec, f, indent=2, sort_keys=True)
with open(os.path.join(out, "containers.conf"), "w") as f:
    f.write(f'[engine]\\ncdi_spec_dirs = ["{out}"]\\n')
print(f"CDI spec for {len(gpus)} GPU(s) written to {out}")
"""


def init_container(
    *, image: str, gpu_resource: str, gpus: str, security_context: Manifest
) -> Manifest:
    """The init container writing the pod's CDI spec: it asks for as many GPUs as the
    Ray container, and the kubelet hands an init container's devices to the app
    containers first, so the Ray container gets exactly these (and the pod's request,
    max(init, sum of apps), counts them once). Requests equal limits: Guaranteed QoS.
    ``gpu_resource`` empty: a DRA worker, whose init container shares the pod's claim
    instead (the caller adds it), and the DRA driver sets NVIDIA_VISIBLE_DEVICES to the
    claim's devices."""
    amounts = {"cpu": INIT_CPU, "memory": INIT_MEMORY}
    if gpu_resource:
        amounts[gpu_resource] = gpus
    return {
        "name": INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", SCRIPT, CDI_DIR],
        "resources": {"limits": dict(amounts), "requests": dict(amounts)},
        "securityContext": security_context,
        "volumeMounts": [{"name": CDI_VOLUME, "mountPath": CDI_DIR}],
    }


def volume() -> Manifest:
    """The pod-local volume the spec is written to (gone with the pod)."""
    return {"name": CDI_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}}


def ray_container_env() -> list[Manifest]:
    """What points the Ray container's podman at the pod's own spec."""
    return [{"name": "CONTAINERS_CONF_OVERRIDE", "value": f"{CDI_DIR}/{CONTAINERS_CONF}"}]


def ray_container_mount() -> Manifest:
    return {"name": CDI_VOLUME, "mountPath": CDI_DIR, "readOnly": True}


def podman_security_context(base: Manifest, *, seccomp_profile: str) -> Manifest:
    """``base`` (gangway's hardened context) with what rootless podman needs and Pod
    Security baseline allows: SETUID/SETGID, privilege escalation for the setuid
    ``newuidmap``, and the platform's Localhost seccomp profile (the runtime's default
    profile refuses the user namespaces and mounts podman makes). Still non-root,
    never privileged."""
    return {
        **base,
        "allowPrivilegeEscalation": True,
        "capabilities": {"add": list(PODMAN_CAPABILITIES), "drop": ["ALL"]},
        "seccompProfile": {"type": "Localhost", "localhostProfile": seccomp_profile},
    }
