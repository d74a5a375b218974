"""The one FilterSet for cluster lists, shared by the API and the dashboard."""

from __future__ import annotations

import django_filters

from clusters.domain.states import State
from clusters.models import ClusterKind, ClusterRequest


class ClusterFilter(django_filters.FilterSet):
    """Filter by state, kind and owner's username."""

    state = django_filters.MultipleChoiceFilter(choices=State.choices)
    kind = django_filters.ChoiceFilter(choices=ClusterKind.choices)
    owner = django_filters.CharFilter(field_name="owner__username")

    class Meta:
        model = ClusterRequest
        fields = ["state", "kind", "owner"]
