"""The write throttle lets writes through while its cache (Redis) cannot be reached,
instead of failing them with a 500 (found by ``reliability/infra.py``)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from benchmarks.support import free_port
from controlplane.api.throttles import WriteThrottle
from controlplane.cache import RedisCache


@pytest.mark.django_db
def test_a_write_is_let_through_while_the_throttle_cache_is_down(django_user_model) -> None:
    user = django_user_model.objects.create_user(username="w", password="x")
    throttle = WriteThrottle()
    # A real Redis client on a port where nothing listens: connection refused.
    throttle.cache = RedisCache(f"redis://127.0.0.1:{free_port()}/0", {})
    request = APIRequestFactory().post("/api/v1/x/", {})
    force_authenticate(request, user=user)
    drf_request = APIView().initialize_request(request)
    drf_request.user = user
    assert throttle.allow_request(drf_request, APIView()) is True
