"""Shared fixtures: the three actors of STYLE 12 and a platform admin.

alice (tenant admin) and bob (engineer) are in tenant ``acme``; charlie (engineer) is
in tenant ``globex``; vera is a viewer in ``acme``; root is a platform admin. Every
fixture that touches the database pulls in ``db`` itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from tenants.models import Role
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    QuotaFactory,
    TenantFactory,
    UserFactory,
)

# Property tests check what the code does, never how fast: on a loaded two-core machine (CI
# runs everything side by side) an example's time or the inputs' generation time says
# nothing about the code. Speed is the benchmarks' (docs/benchmarks.md).
hypothesis_settings.register_profile(
    "gangway", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("gangway")

# `oidc_provider`: a real OpenID provider on loopback, for any test (tests/oidc/fixtures.py).
pytest_plugins = ["tests.oidc.fixtures"]


def pytest_configure(config: Any) -> None:
    """The suite runs on PostgreSQL only (locking, advisory locks and concurrency tests
    mean nothing on SQLite): refuse to start on anything else, saying how to fix it."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(
            f"the tests need PostgreSQL, not {engine}: run `make test`, or set DATABASE_URL "
            "(e.g. postgres://postgres@127.0.0.1:5432/gangway)"
        )


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # Hashing with the production hasher costs ~0.3 s a user; tests create hundreds.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _dry_runs_read_afresh(settings: Any) -> None:
    """A dry-run reads the queue afresh after every change, as on a small queue: a test
    checks a verdict right after changing the queue, and on a loaded machine even a small
    queue's reading may take as long as a large one's (``recorded.SLOW_BUILD``), which
    would answer from the last reading. The stale answers are tested on their own
    (tests/clusters/queue/test_dry_run_cache.py, tests/frontend/test_pages.py)."""
    settings.DRY_RUN_STALE_SECONDS = 0


@pytest.fixture(autouse=True)
def _passes_list(settings: Any) -> Any:
    """In-process reconcile passes LIST every kind, as a pass without informers does: a
    test checks a pass's outcome right after writing to the cluster, and a watch may
    deliver a write a moment later. The informers are tested on their own
    (tests/clusters/engine/test_informers.py) and run in every real worker process the
    suite starts (the reliability rig's)."""
    settings.RECONCILE_WATCH = False
    yield
    from clusters.engine import informers

    informers.stop()


@pytest.fixture
def h100(db: Any) -> Any:
    return GpuFlavorFactory(name="h100")


@pytest.fixture
def l4(db: Any) -> Any:
    return GpuFlavorFactory(
        name="l4",
        gpu_product="NVIDIA-L4",
        gpus_per_node=1,
        cpu_per_node=16,
        memory_per_node_gib=64,
        node_count=4,
        sharing=True,
    )


@pytest.fixture
def acme(db: Any, h100: Any, l4: Any) -> Any:
    tenant = TenantFactory(slug="acme", name="Acme Research", cpu_quota=1000, memory_quota_gib=8000)
    QuotaFactory(tenant=tenant, flavor=h100, gpus=16, borrow_limit=8)
    QuotaFactory(tenant=tenant, flavor=l4, gpus=2, borrow_limit=0)
    return tenant


@pytest.fixture
def globex(db: Any, h100: Any, l4: Any) -> Any:
    tenant = TenantFactory(slug="globex", name="Globex Labs", cpu_quota=1000, memory_quota_gib=8000)
    QuotaFactory(tenant=tenant, flavor=h100, gpus=16, borrow_limit=8)
    QuotaFactory(tenant=tenant, flavor=l4, gpus=2, borrow_limit=0)
    return tenant


@pytest.fixture
def alice(acme: Any) -> Any:
    user = UserFactory(username="alice")
    MembershipFactory(tenant=acme, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def bob(acme: Any) -> Any:
    user = UserFactory(username="bob")
    MembershipFactory(tenant=acme, user=user, role=Role.ENGINEER)
    return user


@pytest.fixture
def vera(acme: Any) -> Any:
    user = UserFactory(username="vera")
    MembershipFactory(tenant=acme, user=user, role=Role.VIEWER)
    return user


@pytest.fixture
def charlie(globex: Any) -> Any:
    user = UserFactory(username="charlie")
    MembershipFactory(tenant=globex, user=user, role=Role.ENGINEER)
    return user


@pytest.fixture
def root(db: Any) -> Any:
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def as_user(api: APIClient) -> Any:
    """``as_user(user)`` returns an API client authenticated as that user (or anonymous)."""

    def login(user: Any | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user=user)
        return client

    return login


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """Tests hash many passwords; the production hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    """Throttle counters live in the cache, the dry-run keeps its recorded pass per
    process, the reconciler its memo of settled rows per member, and the writers of
    Kubernetes objects what they applied and the API servers' Retry-After deadlines, per
    member name (which every fleet test reuses for its new kubesims): each test starts with
    none."""
    from django.core.cache import cache

    from clusters.engine import foldmemo
    from clusters.kube import applied, notbefore
    from clusters.queue import dry_run_cache as recorded

    cache.clear()
    recorded.forget()
    foldmemo.forget_all()
    applied.forget_everything()
    notbefore.forget_local()
    yield
