"""Which rows one reconcile pass is over: those placed on one member of the fleet, and on
the home member (:func:`clusters.kube.connection.home_member`) the rows no placement has
named yet. Without registered members, a pass is over every row, on settings' cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from clusters.kube.connection import gateway_for, home_member
from clusters.kube.gateway import Gateway, get_gateway
from clusters.models import KubeCluster


@dataclass(frozen=True)
class MemberScope:
    """A pass's member (``None``: no members, settings' cluster) and whether it is the
    home member, which also holds the rows not placed yet."""

    member: KubeCluster | None
    home: bool

    @classmethod
    def of(cls, member: KubeCluster | None) -> MemberScope:
        """The scope of ``member`` (``None``: the home member, if any)."""
        home = home_member()
        if member is None:
            return cls(home, True)
        return cls(member, home is None or home.pk == member.pk)

    @property
    def name(self) -> str:
        return self.member.name if self.member is not None else ""

    def gateway(self) -> Gateway:
        return get_gateway() if self.member is None else gateway_for(self.member)

    def rows(self) -> Q:
        """The rows placed here, as a filter on ``ClusterRequest``."""
        if self.member is None:
            return Q()
        placed = Q(kube_cluster_id=self.member.pk)
        return placed | Q(kube_cluster__isnull=True) if self.home else placed

    def sql(self, alias: str) -> tuple[str, list[int]]:
        """The same filter as SQL on the table aliased ``alias`` (" AND ..."), and its
        parameters."""
        if self.member is None:
            return "", []
        column = f"{alias}.kube_cluster_id"
        if self.home:
            return f" AND ({column} = %s OR {column} IS NULL)", [self.member.pk]
        return f" AND {column} = %s", [self.member.pk]
