"""A service's own fields (clusters.kinds.rayservice.spec): the Serve config and the
upgrade strategy are refused field by field, with what is wrong."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from clusters.kinds.rayservice.spec import (
    ServiceSpec,
    parse_serve_config,
    validate_service,
    validate_upgrade,
)
from tests.clusters.kinds.rayservice.samples import AUTOSCALING, STABLE_DIFFUSION


def _faults(text: str) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        parse_serve_config(text)
    return caught.value.message_dict["serve_config"]


def test_the_samples_parse() -> None:
    config = parse_serve_config(STABLE_DIFFUSION)
    (app,) = config["applications"]
    assert app["deployments"][1]["ray_actor_options"] == {"num_gpus": 1}
    assert parse_serve_config(AUTOSCALING)["applications"][0]["name"] == "echo"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "needs a Serve config"),
        ("applications: [", "Not valid YAML"),
        ("applications: []", "one or more applications"),
        ("- just a list", "one or more applications"),
        ("applications:\n  - name: a\n", 'import_path must read "module:attribute"'),
        ("applications:\n  - import_path: 'not a path'\n", "import_path must read"),
        (
            "applications:\n  - {name: a, import_path: m:a}\n  - {name: a, import_path: m:b}\n",
            "a name of its own",
        ),
        (
            "applications:\n  - {name: a, import_path: m:a, route_prefix: api}\n",
            "route_prefix must start with /",
        ),
        (
            "applications:\n  - {import_path: m:a, deployments: [{num_replicas: 1}]}\n",
            "a deployment needs a name",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        ray_actor_options: {num_gpus: -1}\n",
            "ray_actor_options.num_gpus must be a number >= 0",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        ray_actor_options: {num_gpus: one}\n",
            "ray_actor_options.num_gpus must be a number >= 0",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        num_replicas: 2\n        autoscaling_config: {max_replicas: 3}\n",
            "not both",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        autoscaling_config: {min_replicas: 4, max_replicas: 3}\n",
            "max_replicas must be >= 1 and >= min_replicas",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        autoscaling_config: {min_replicas: 1, max_replicas: 3, "
            "initial_replicas: 5}\n",
            "initial_replicas must lie between",
        ),
        (
            "applications:\n  - import_path: m:a\n    deployments:\n      - name: D\n"
            "        num_replicas: many\n",
            "num_replicas must be an integer",
        ),
    ],
)
def test_a_wrong_serve_config_is_refused_saying_why(text: str, said: str) -> None:
    assert any(said in fault for fault in _faults(text)), _faults(text)


def test_every_fault_of_every_application_is_told_at_once() -> None:
    text = (
        "applications:\n  - {name: a, import_path: bad}\n"
        "  - name: b\n    import_path: m:b\n    deployments: [{name: D, num_replicas: -1}]\n"
    )
    faults = _faults(text)
    assert len(faults) == 2
    assert faults[0].startswith("applications[0]") and faults[1].startswith("applications[1]")


def test_upgrade_strategies() -> None:
    for kind in ("NewCluster", "None"):
        validate_upgrade(kind, {}, autoscales=False)
    options = {"maxSurgePercent": 50, "stepSizePercent": 10, "intervalSeconds": 30}
    validate_upgrade("NewClusterWithIncrementalUpgrade", options, autoscales=True)
    # maxSurgePercent may be left to KubeRay's default.
    validate_upgrade(
        "NewClusterWithIncrementalUpgrade",
        {"stepSizePercent": 10, "intervalSeconds": 30},
        autoscales=True,
    )


@pytest.mark.parametrize(
    ("kind", "options", "autoscales", "said"),
    [
        ("Rolling", {}, True, "type must be one of"),
        ("NewCluster", {"stepSizePercent": 10}, True, "go with NewClusterWithIncrementalUpgrade"),
        ("NewClusterWithIncrementalUpgrade", {"intervalSeconds": 30}, True, "stepSizePercent"),
        (
            "NewClusterWithIncrementalUpgrade",
            {"stepSizePercent": 0, "intervalSeconds": 30},
            True,
            "stepSizePercent must be an integer from 1 to 100",
        ),
        (
            "NewClusterWithIncrementalUpgrade",
            {"stepSizePercent": 30, "intervalSeconds": 30, "maxSurgePercent": 20},
            True,
            "stepSizePercent must be at most maxSurgePercent",
        ),
        (
            "NewClusterWithIncrementalUpgrade",
            {"stepSizePercent": 10, "intervalSeconds": 30, "maxSurgePercent": 150},
            True,
            "maxSurgePercent must be an integer from 1 to 100",
        ),
        (
            "NewClusterWithIncrementalUpgrade",
            {"stepSizePercent": 10, "intervalSeconds": 30, "surge": 1},
            True,
            "unknown option 'surge'",
        ),
        (
            "NewClusterWithIncrementalUpgrade",
            {"stepSizePercent": 10, "intervalSeconds": 30},
            False,
            "needs an autoscaling worker group",
        ),
    ],
)
def test_a_wrong_upgrade_strategy_is_refused(
    kind: str, options: dict[str, int], autoscales: bool, said: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_upgrade(kind, options, autoscales=autoscales)
    faults = caught.value.message_dict["upgrade_strategy"]
    assert any(said in fault for fault in faults), faults


def test_a_spec_from_a_body() -> None:
    spec = ServiceSpec.from_data(
        {
            "serve_config": AUTOSCALING,
            "upgrade_strategy": {
                "type": "NewClusterWithIncrementalUpgrade",
                "cluster_upgrade_options": {"stepSizePercent": 20, "intervalSeconds": 5},
            },
        }
    )
    assert spec.upgrade_type == "NewClusterWithIncrementalUpgrade"
    assert validate_service(spec, autoscales=True)["applications"][0]["name"] == "echo"
    assert ServiceSpec.from_data({"serve_config": "x"}).upgrade_type == "NewCluster"
