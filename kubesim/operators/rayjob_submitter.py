"""The submitter of a K8sJobMode RayJob as KubeRay builds it: the labels on what a RayJob
creates, the submitter pod template, its ``ray job submit`` command, and what the
submitter Job's end means for the RayJob."""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import yaml

from kubesim.operators import batchjob
from kubesim.store import Obj, Store
from kubesim.util import get_path

SUBMITTER_CONTAINER = "ray-job-submitter"


def rayjob_labels(name: str) -> dict[str, str]:
    """The labels KubeRay puts on what a RayJob creates."""
    return {
        "ray.io/originated-from-cr-name": name,
        "ray.io/originated-from-crd": "RayJob",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


def submitter_template(rj: Obj, st: dict[str, Any], rc: Obj) -> dict[str, Any]:
    """KubeRay's submitter pod template: ``spec.submitterPodTemplate``, else one
    ``ray-job-submitter`` container with the head's image (requests 500m/200Mi, limits
    1/1Gi, restartPolicy Never); the ``ray job`` command unless the template has one;
    ``PYTHONUNBUFFERED``, ``RAY_DASHBOARD_ADDRESS``, ``RAY_JOB_SUBMISSION_ID``."""
    spec = rj.get("spec") or {}
    if spec.get("submitterPodTemplate"):
        template = copy.deepcopy(spec["submitterPodTemplate"])
    else:
        head = get_path(rc, "spec", "headGroupSpec", "template", "spec", "containers")
        image = (head or [{}])[0].get("image", "rayproject/ray:latest")
        template = {
            "spec": {
                "containers": [
                    {
                        "name": SUBMITTER_CONTAINER,
                        "image": image,
                        "resources": {
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "500m", "memory": "200Mi"},
                        },
                    }
                ],
                "restartPolicy": "Never",
            }
        }
    container = template.setdefault("spec", {}).setdefault("containers", [{}])[0]
    if not container.get("command"):
        container["command"] = ["/bin/bash", "-ce", "--"]
        container["args"] = [" ".join(submit_command(rj, st))]
    env = container.setdefault("env", [])
    env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    env.append({"name": "RAY_DASHBOARD_ADDRESS", "value": st.get("dashboardURL", "")})
    env.append({"name": "RAY_JOB_SUBMISSION_ID", "value": st.get("jobId", "")})
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(rayjob_labels(rj["metadata"]["name"]))
    return template


def submit_command(rj: Obj, st: dict[str, Any]) -> list[str]:
    """KubeRay's K8sJobMode submitter command (``BuildJobSubmitCommand``): wait for
    the GCS, submit unless already submitted, follow the logs. The words are joined with
    spaces into one ``bash -c`` script; the runtime env, metadata and entrypoint resources
    are quoted for that shell. KubeRay quotes them Go's way (``strconv.Quote``: double
    quotes, in which bash would still expand a ``$``); single quotes pass any JSON
    through unchanged."""
    spec = rj.get("spec") or {}
    address = st.get("dashboardURL", "")
    if not address.startswith("http://"):
        address = "http://" + address
    job_id = st.get("jobId", "")
    health = (
        'python -c "import urllib.request; '
        f"urllib.request.urlopen('{address}/api/gcs_healthz', timeout=10)\""
    )
    cmd = ["until", health, ">/dev/null", "2>&1", ";", "do", "echo"]
    cmd += [f'"Waiting for Ray Dashboard GCS to become healthy at {address} ..."']
    cmd += [";", "sleep", "2", ";", "done", ";", "if", "!", "ray", "job", "status"]
    cmd += ["--address", address, job_id, ">/dev/null", "2>&1", ";", "then"]
    cmd += ["ray", "job", "submit", "--address", address, "--no-wait"]
    runtime_env = runtime_env_json(spec)
    if runtime_env:
        cmd += ["--runtime-env-json", shlex.quote(runtime_env)]
    if spec.get("metadata"):
        cmd += ["--metadata-json", shlex.quote(json.dumps(spec["metadata"], sort_keys=True))]
    if job_id:
        cmd += ["--submission-id", job_id]
    for field, flag in (
        ("entrypointNumCpus", "--entrypoint-num-cpus"),
        ("entrypointNumGpus", "--entrypoint-num-gpus"),
    ):
        if spec.get(field):
            cmd += [flag, f"{float(spec[field]):f}"]
    if spec.get("entrypointResources"):
        cmd += ["--entrypoint-resources", shlex.quote(str(spec["entrypointResources"]))]
    cmd += ["--", str(spec.get("entrypoint", "")).strip(), ";", "fi", ";"]
    cmd += ["ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


def runtime_env_json(spec: dict[str, Any]) -> str:
    """``spec.runtimeEnvYAML`` as JSON, as KubeRay's ``getRuntimeEnvJson`` converts it
    ("" when there is none, or when it does not parse: KubeRay then makes no submitter
    and logs the error, here the job is submitted without it)."""
    text = spec.get("runtimeEnvYAML") or ""
    try:
        env = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return ""
    return json.dumps(env, sort_keys=True) if env else ""


def check_submitter(store: Store, rj: Obj, st: dict[str, Any]) -> tuple[bool, str | None]:
    """KubeRay's ``checkSubmitterAndUpdateStatusIfNeeded`` for K8sJobMode: (stop here,
    when the submitter Job finished). A Failed Job fails the RayJob."""
    job = store.get(batchjob.KEY, rj["metadata"]["namespace"], rj["metadata"]["name"])
    if job is None:
        return True, None  # KubeRay logs the error and requeues
    if batchjob.is_finished(job) != "Failed":
        return False, batchjob.finished_at(job)
    st["jobDeploymentStatus"] = "Failed"
    if st.get("jobStatus") == "FAILED":
        st["reason"] = "AppFailed"
    else:
        cond = next(
            c
            for c in job["status"]["conditions"]
            if c["type"] == "Failed" and c["status"] == "True"
        )
        st["reason"] = "SubmissionFailed"
        st["message"] = (
            f"Job submission has failed. Reason: {cond.get('reason', '')}. "
            f"Message: {cond.get('message', '')}"
        )
    return True, None
