"""Fixtures for the tests of working on a running cluster (proxy, logs, idle reclaim)."""

from __future__ import annotations

from tests.frontend.conftest import request_cluster

__all__ = ["request_cluster"]
