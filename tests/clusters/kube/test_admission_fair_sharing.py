"""Kueue mode with usage-decayed fair share: the Configuration stanza ``kubecluster
kueue-config`` prints (Kueue v0.19's ``admissionFairSharing``) and the ClusterQueues'
``admissionScope``, which validate against Kueue's CRDs; nothing of it when off."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import yaml
from django.core.management import call_command

from clusters.kube.queues import admission_fair_sharing, kueue_objects
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.kube.schemas import validate_object


def test_the_configuration_stanza_counts_gpus_with_the_half_life(h100: Any) -> None:
    stanza = admission_fair_sharing([h100], timedelta(hours=168))
    assert stanza == {
        "admissionFairSharing": {
            "usageHalfLifeTime": "168h",
            "usageSamplingInterval": "5m",
            "resourceWeights": {"cpu": 0, "memory": 0, "nvidia.com/gpu": 1},
        }
    }
    minutes = admission_fair_sharing([h100], timedelta(minutes=90))
    assert minutes["admissionFairSharing"]["usageHalfLifeTime"] == "90m"


def test_kueue_config_prints_it_only_when_configured(h100: Any, capsys: Any, settings: Any) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    call_command("kubecluster", "kueue-config")
    assert "admissionFairSharing" not in capsys.readouterr().out
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 24
    call_command("kubecluster", "kueue-config")
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["admissionFairSharing"]["usageHalfLifeTime"] == "24h"
    assert "deviceClassMappings" in printed["resources"]


def test_cluster_queues_ask_for_usage_based_admission_only_when_on(acme: Any, h100: Any) -> None:
    def queues(on: bool) -> list[dict[str, Any]]:
        objects = kueue_objects(
            Tenant.objects.all(),
            GpuFlavor.objects.all(),
            Quota.objects.all(),
            usage_fair_sharing=on,
        )
        return [o for o in objects if o["kind"] == "ClusterQueue"]

    (on,) = queues(True)
    assert on["spec"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    validate_object(on)
    (off,) = queues(False)
    assert "admissionScope" not in off["spec"]
