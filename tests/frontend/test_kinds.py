"""The dashboard's workload kinds (frontend/kinds.py): every kind a request row can
name has a pages description whose routes, templates and form exist."""

from __future__ import annotations

import pytest
from django.template.loader import get_template
from django.urls import NoReverseMatch, reverse

from clusters.models import Workload
from frontend.kinds import all_pages, pages_for, route_names

FRAGMENTS = ("row.html", "status.html", "sections.html", "log.html", "log_slot.html")


@pytest.mark.parametrize("workload", Workload.values)
def test_every_workload_has_its_pages(workload: str) -> None:
    kind = pages_for(workload)
    assert workload == kind.WORKLOAD
    names = route_names(kind)
    assert reverse(names["list"], args=["acme"]).endswith("/t/acme/" + kind.LIST_PATH)
    assert reverse(names["detail"], args=["acme", "x"]) == f"/t/acme/{kind.PATH}x/"
    for fragment in FRAGMENTS:
        get_template(kind.TEMPLATES + fragment)
    assert callable(kind.NEW_FORM.specs) and callable(kind.NEW_FORM.add_service_errors)
    assert set(kind.ACTIONS) >= {"delete"}


def test_only_a_kind_with_manifests_has_their_download() -> None:
    for kind in all_pages().values():
        name = route_names(kind)["manifests"]
        if kind.MANIFESTS is None:
            with pytest.raises(NoReverseMatch):
                reverse(name, args=["acme", "x"])
        else:
            assert reverse(name, args=["acme", "x"]).endswith("/manifests.yaml")
