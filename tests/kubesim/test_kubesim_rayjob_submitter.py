"""The submitter's ``ray job submit`` command as KubeRay builds it, run by a real bash with
``ray`` and ``python`` as shell functions that record what they were given: the runtime
env, metadata and entrypoint resources reach ``ray`` as the exact JSON the RayJob asks
for, whatever characters they hold."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from kubesim.operators.rayjob_submitter import runtime_env_json, submit_command

STATUS = {"dashboardURL": "train-head-svc.ns.svc.cluster.local:8265", "jobId": "train-x1"}
# The GCS is healthy at once; ``ray job status`` says the job is new; every other ``ray``
# call writes its arguments, NUL-separated, one call a line.
STUBS = (
    "python() { return 0; }\n"
    'ray() { if [ "$2" = status ]; then return 1; fi; printf "%s\\0" "$@" >> "$CALLS";'
    ' printf "\\n" >> "$CALLS"; }\n'
)


def _rayjob(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns"}, "spec": spec}


def _run(cmd: list[str], tmp_path: Path) -> list[list[str]]:
    """Run the command line as the submitter's ``bash -ce`` does; the ``ray`` calls it made."""
    calls = tmp_path / "calls"
    script = STUBS + " ".join(cmd)
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0, script
    subprocess.run(["bash", "-ce", script], check=True, env={"CALLS": str(calls)}, timeout=30)
    lines = calls.read_text().split("\n")
    return [line.rstrip("\0").split("\0") for line in lines if line]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_runtime_env_reaches_ray_as_json_whatever_it_holds(tmp_path: Path) -> None:
    env = {
        "env_vars": {
            "GANGWAY_RESUME_FROM": "file:///tmp/ckpt/step-12",
            "QUOTED": 'it\'s "quoted"; $HOME `date` \\ & | > done',
        },
        "pip": ["requests==2.32.3"],
        "working_dir": "s3://bucket/run dir/",
    }
    spec = {
        "entrypoint": "python train.py --steps 30",
        "runtimeEnvYAML": yaml.safe_dump(env),
        "metadata": {"owner": "alice's team", "cost": "$5"},
        "entrypointNumCpus": 1,
        "entrypointResources": '{"custom": 1}',
    }
    submit, logs = _run(submit_command(_rayjob(**spec), STATUS), tmp_path)
    assert submit[:3] == ["job", "submit", "--address"]
    assert json.loads(_flag(submit, "--runtime-env-json")) == env
    assert json.loads(_flag(submit, "--metadata-json")) == spec["metadata"]
    assert json.loads(_flag(submit, "--entrypoint-resources")) == {"custom": 1}
    assert _flag(submit, "--submission-id") == "train-x1"
    assert _flag(submit, "--entrypoint-num-cpus") == "1.000000"
    # The entrypoint is the shell's to split, as KubeRay leaves it.
    assert submit[submit.index("--") + 1 :] == ["python", "train.py", "--steps", "30"]
    address = f"http://{STATUS['dashboardURL']}"
    assert logs == ["job", "logs", "--address", address, "--follow", "train-x1"]


def test_no_runtime_env_no_flag(tmp_path: Path) -> None:
    (submit, _) = _run(submit_command(_rayjob(entrypoint="python -c 'print(1)'"), STATUS), tmp_path)
    assert "--runtime-env-json" not in submit and "--metadata-json" not in submit
    assert submit[submit.index("--") + 1 :] == ["python", "-c", "print(1)"]


def test_runtime_env_json_converts_the_yaml_and_skips_what_does_not_parse() -> None:
    assert (
        runtime_env_json({"runtimeEnvYAML": "env_vars:\n  A: '1'\n"}) == '{"env_vars": {"A": "1"}}'
    )
    assert runtime_env_json({}) == ""
    assert runtime_env_json({"runtimeEnvYAML": "env_vars: [unclosed"}) == ""
