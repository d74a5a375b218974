"""Pod Security admission: a namespace's ``pod-security.kubernetes.io/enforce`` level.

A pod that breaks its namespace's standard is refused (403) naming every broken control
as Kubernetes words them; a controller's pod is refused the same way and the controller
reports it as an event. Checked: what a pod's spec can break (host namespaces,
privileged, capabilities, hostPath, host ports, Unconfined seccomp; for ``restricted``
also escalation, dropping ALL, non-root, a seccomp profile, volume types). Windows,
AppArmor, SELinux, sysctls and /proc mount types are not modelled.
"""

from __future__ import annotations

from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)

Obj = dict[str, Any]


def _containers(spec: Obj) -> list[Obj]:
    return [
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _baseline(spec: Obj) -> list[str]:
    faults = []
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        faults.append(f"host namespaces ({', '.join(hosts)})")
    containers = _containers(spec)
    privileged = [
        c["name"] for c in containers if (c.get("securityContext") or {}).get("privileged")
    ]
    if privileged:
        faults.append(
            f"privileged (container {_quoted(privileged)} must not set "
            "securityContext.privileged=true)"
        )
    for c in containers:
        added = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        extra = sorted(set(added) - BASELINE_CAPABILITIES)
        if extra:
            faults.append(
                f'non-default capabilities (container "{c["name"]}" must not include '
                f"{_quoted(extra)} in securityContext.capabilities.add)"
            )
    paths = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    if paths:
        faults.append(f"hostPath volumes (volume {_quoted(paths)})")
    ports = [
        (c["name"], p["hostPort"])
        for c in containers
        for p in c.get("ports") or []
        if p.get("hostPort")
    ]
    if ports:
        used = ", ".join(f'container "{n}" uses hostPort {port}' for n, port in ports)
        faults.append(f"hostPort ({used})")
    unconfined = [
        c["name"]
        for c in containers
        if ((c.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
        == "Unconfined"
    ]
    pod_unconfined = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get(
        "type"
    ) == "Unconfined"
    if unconfined or pod_unconfined:
        who = "pod" if pod_unconfined else f"container {_quoted(unconfined)}"
        faults.append(
            f"seccompProfile ({who} must not set securityContext.seccompProfile.type "
            'to "Unconfined")'
        )
    return faults


def _restricted(spec: Obj) -> list[str]:
    faults = []
    pod = spec.get("securityContext") or {}
    containers = _containers(spec)

    def ctx(c: Obj) -> Obj:
        return c.get("securityContext") or {}

    escalating = [
        c["name"] for c in containers if ctx(c).get("allowPrivilegeEscalation") is not False
    ]
    if escalating:
        faults.append(
            f"allowPrivilegeEscalation != false (container {_quoted(escalating)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    caps = []
    for c in containers:
        capabilities = ctx(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            caps.append(
                f'container "{c["name"]}" must set securityContext.capabilities.drop=["ALL"]'
            )
        extra = sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"})
        if extra:
            caps.append(
                f'container "{c["name"]}" must not include {_quoted(extra)} in '
                "securityContext.capabilities.add"
            )
    if caps:
        faults.append(f"unrestricted capabilities ({'; '.join(caps)})")
    root = [
        c["name"]
        for c in containers
        if ctx(c).get("runAsNonRoot", pod.get("runAsNonRoot")) is not True
    ]
    if root:
        faults.append(
            f"runAsNonRoot != true (pod or container {_quoted(root)} must set "
            "securityContext.runAsNonRoot=true)"
        )
    unset = [
        c["name"]
        for c in containers
        if (ctx(c).get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        not in ("RuntimeDefault", "Localhost")
    ]
    if unset:
        faults.append(
            f"seccompProfile (pod or container {_quoted(unset)} must set "
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
        )
    kinds = sorted(
        {
            f'"{v["name"]}"'
            for v in spec.get("volumes") or []
            if not (set(v) - {"name"}) <= RESTRICTED_VOLUMES and "hostPath" not in v
        }
    )
    if kinds:
        faults.append(f"restricted volume types (volumes {', '.join(kinds)})")
    return faults


def violations(level: str, pod: Obj) -> list[str]:
    """The controls of ``level`` (``baseline`` or ``restricted``) that ``pod`` breaks."""
    spec = pod.get("spec") or {}
    if level == "baseline":
        return _baseline(spec)
    if level == "restricted":
        return _baseline(spec) + _restricted(spec)
    return []


def refusal(namespace: Obj | None, pod: Obj) -> str:
    """Why the API server refuses ``pod`` in ``namespace`` (``""``: it admits it)."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    level = labels.get(ENFORCE_LABEL, "privileged")
    faults = violations(level, pod)
    if not faults:
        return ""
    return f'violates PodSecurity "{level}:latest": {", ".join(faults)}'
