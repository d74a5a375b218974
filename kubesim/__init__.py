"""kubesim: a simulated GPU Kubernetes cluster serving the Kubernetes REST API on loopback.

It stands in for a real cluster (nodes from a fleet file, a scheduler, ResourceQuota
admission, the KubeRay operator and optionally Kueue and KAI) for development, tests and
benchmarks. It imports nothing of the control plane. See README.md.
"""

from kubesim.sim import KubeSim

__all__ = ["KubeSim"]
