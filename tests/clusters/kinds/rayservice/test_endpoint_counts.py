"""Requests through a service's endpoint, counted in the cache and flushed to its row
(clusters.kinds.rayservice.endpoint_counts): never lost between flushes, never twice."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.rayservice import endpoint_counts
from clusters.models import Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(make_cluster: Any) -> Service:
    row = make_cluster(name="svc", workload="service")
    row.save()
    return Service.objects.create(request=row, serve_config="applications: []")


def test_the_first_request_flushes_and_later_ones_wait_in_the_counter(service: Service) -> None:
    for _ in range(3):
        endpoint_counts.request_counted(service.pk)
    service.refresh_from_db()
    # The first found the flush lock free; the two after it wait for the next flush.
    assert (service.requests_total, endpoint_counts.pending(service.pk)) == (1, 2)
    assert endpoint_counts.requests_total(service) == 3


def test_a_flush_moves_what_is_pending_onto_the_row_once(service: Service) -> None:
    endpoint_counts.request_counted(service.pk)
    endpoint_counts.request_counted(service.pk)
    assert endpoint_counts.requests_flush(service.pk) == 1
    assert endpoint_counts.requests_flush(service.pk) == 0
    service.refresh_from_db()
    assert service.requests_total == 2
    assert endpoint_counts.requests_total(service) == 2
