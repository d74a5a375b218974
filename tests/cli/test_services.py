"""``gangway service``: submit from a Serve config file, list, status, upgrade and
delete a service through the live API (the row is the server's; no worker runs, so the
service stays queued)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clusters.models import ClusterRequest, Growth, Service, Surge
from gangway_cli import exitcodes
from tests.cli.conftest import Run
from tests.clusters.kinds.rayservice.samples import AUTOSCALING, STABLE_DIFFUSION

pytestmark = pytest.mark.django_db(transaction=True)

Cli = Callable[..., Run]


def test_a_service_is_submitted_listed_upgraded_and_deleted(
    cli: Cli, login: Any, bob: Any, tmp_path: Path
) -> None:
    login("bob")
    config = tmp_path / "serve.yaml"
    config.write_text(STABLE_DIFFUSION)
    done = cli("service", "submit", "--name", "sd", "-f", "l4", "-c", str(config))
    assert done.code == 0, done
    assert "sd: queued" in done.out
    assert Service.objects.get(request__name="sd").serve_config == STABLE_DIFFUSION

    listed = cli("service", "ls")
    assert listed.code == 0, listed
    (line,) = [row for row in listed.out.splitlines() if row.startswith("sd ")]
    assert "queued" in line and "l4" in line

    status = cli("service", "status", "sd", "-o", "json")
    assert status.code == 0, status
    assert status.json()["service"]["upgrade_strategy"]["type"] == "NewCluster"

    upgraded = cli("service", "upgrade", "sd", "-c", "-", stdin=AUTOSCALING)
    assert upgraded.code == 0, upgraded
    assert Service.objects.get(request__name="sd").serve_config == AUTOSCALING

    # An upgrade waiting for its surge says so (the engine's tests bring one about).
    row = ClusterRequest.objects.get(name="sd")
    said = "upgrade waits for 1 l4 GPU: l4 quota is in use"
    Surge.objects.create(request=row, flavor=row.flavor, gpus=1, queue_message=said)
    status = cli("service", "status", "sd")
    assert status.code == 0 and said in status.out, status

    gone = cli("service", "rm", "sd")
    assert gone.code == 0, gone
    assert ClusterRequest.objects.get(name="sd").state in ("deleting", "deleted")


def test_status_says_where_an_autoscaling_services_growth_stands(
    cli: Cli, login: Any, alice: Any
) -> None:
    login("alice")
    done = cli(
        "service",
        "submit",
        "--name",
        "echo",
        "-f",
        "l4",
        "--kind",
        "prod",
        "-w",
        "1",
        "--min-workers",
        "1",
        "--max-workers",
        "3",
        "-c",
        "-",
        stdin=AUTOSCALING,
    )
    assert done.code == 0, done
    row = ClusterRequest.objects.get(name="echo")
    said = "growth by 1 worker (1 l4 GPU) waits: the cohort has no l4 GPU to lend"
    Growth.objects.create(request=row, flavor=row.flavor, workers=1, gpus=1, queue_message=said)
    status = cli("service", "status", "echo")
    assert status.code == 0, status
    assert "charged for 1 worker(s), may run 1 of at most 3" in status.out
    assert said in status.out


def test_status_shows_an_incremental_upgrades_traffic_split(
    cli: Cli, login: Any, bob: Any, l4: Any
) -> None:
    login("bob")
    done = cli("service", "submit", "--name", "sd", "-f", "l4", "-c", "-", stdin=STABLE_DIFFUSION)
    assert done.code == 0, done
    assert "traffic" not in cli("service", "status", "sd").out  # no upgrade, no split
    side = {"cluster": "sd-raycluster-old", "target_capacity": 50, "traffic_routed_percent": 75}
    new = {"cluster": "sd-raycluster-new", "target_capacity": 50, "traffic_routed_percent": 25}
    Service.objects.filter(request__name="sd").update(traffic={"active": side, "pending": new})
    status = cli("service", "status", "sd")
    assert status.code == 0, status
    assert (
        "sd-raycluster-old 75% of requests (capacity 50%) / "
        "sd-raycluster-new 25% of requests (capacity 50%)"
    ) in status.out


def test_a_wrong_config_is_refused_with_the_servers_words(
    cli: Cli, login: Any, bob: Any, tmp_path: Path
) -> None:
    login("bob")
    config = tmp_path / "serve.yaml"
    config.write_text("applications:\n  - name: a\n")
    done = cli("service", "submit", "--name", "sd", "-f", "l4", "-c", str(config))
    assert done.code != 0 and "import_path" in done.err, done
    missing = cli("service", "submit", "--name", "sd", "-f", "l4", "-c", str(tmp_path / "no"))
    assert missing.code == exitcodes.USAGE and "cannot read" in missing.err, missing
    assert cli("service", "upgrade", "sd").code == exitcodes.USAGE
    assert not ClusterRequest.objects.exists()


def test_scale_to_zero_is_submitted_and_shown(
    cli: Cli, login: Any, bob: Any, tmp_path: Path
) -> None:
    login("bob")
    config = tmp_path / "serve.yaml"
    config.write_text(STABLE_DIFFUSION)
    args = ("service", "submit", "-f", "l4", "-c", str(config))
    done = cli(*args, "--name", "sd", "--scale-to-zero", "--scale-to-zero-after", "10")
    assert done.code == 0, done
    assert "sd: queued; scale to zero after 10 min without requests" in done.out
    details = Service.objects.get(request__name="sd")
    assert details.scale_to_zero and details.scale_to_zero_after_minutes == 10
    status = cli("service", "status", "sd")
    assert status.code == 0 and "after 10 min without requests" in status.out, status

    # Off by default; a window out of bounds is refused with the server's words.
    assert "scale to zero off" in cli(*args, "--name", "plain").out
    refused = cli(*args, "--name", "bad", "--scale-to-zero", "--scale-to-zero-after", "1")
    assert refused.code != 0 and "scale_to_zero_after_minutes" in refused.err, refused
    assert not ClusterRequest.objects.filter(name="bad").exists()

    # `service set` changes it on a service that exists.
    changed = cli("service", "set", "plain", "--scale-to-zero", "--scale-to-zero-after", "60")
    assert changed.code == 0, changed
    assert "plain: scale to zero after 60 min without requests" in changed.out
    off = cli("service", "set", "sd", "--no-scale-to-zero")
    assert off.code == 0 and "sd: scale to zero off" in off.out, off
    assert not Service.objects.get(request__name="sd").scale_to_zero
    assert cli("service", "set", "sd").code == exitcodes.USAGE
