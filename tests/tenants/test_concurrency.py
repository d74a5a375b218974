"""Two requests creating the same tenant or flavor at once: one wins, the other gets a
clear field error (never a database error), and exactly one row and audit event exist."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from tenants import services
from tenants.models import AuditEvent, GpuFlavor, Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _race(create: Callable[[], Any], times: int = 6) -> list[BaseException | None]:
    barrier = threading.Barrier(times)
    outcomes: list[BaseException | None] = []

    def run() -> None:
        try:
            barrier.wait()
            create()
            outcomes.append(None)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on below
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_concurrent_tenant_creation(root: Any) -> None:
    outcomes = _race(lambda: services.tenant_create(actor=root, slug="initech", name="Initech"))
    assert outcomes.count(None) == 1
    errors = [exc for exc in outcomes if exc is not None]
    assert all(isinstance(exc, ValidationError) for exc in errors), errors
    assert all("slug" in exc.message_dict for exc in errors if isinstance(exc, ValidationError))
    assert Tenant.objects.filter(slug="initech").count() == 1
    assert AuditEvent.objects.filter(action="tenant.create").count() == 1


def test_concurrent_flavor_creation(root: Any) -> None:
    outcomes = _race(
        lambda: services.flavor_create(
            actor=root,
            name="a10",
            gpu_product="NVIDIA-A10",
            gpus_per_node=4,
            cpu_per_node=64,
            memory_per_node_gib=256,
        )
    )
    assert outcomes.count(None) == 1
    assert all(isinstance(exc, ValidationError) for exc in outcomes if exc is not None)
    assert GpuFlavor.objects.filter(name="a10").count() == 1
