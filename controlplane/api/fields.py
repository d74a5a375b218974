"""Fields shared by every app's API that read rows (kept apart from
:mod:`controlplane.api.serializers`, which the pagination class imports while DRF's
settings load: these need DRF's generic views, which read those settings)."""

from __future__ import annotations

from typing import Any

from controlplane.api import generics as drf


class SlugRowField(drf.SlugRelatedField):
    """A row by its slug field; a value with a NUL is refused as a row that does not
    exist (no slug holds one), since PostgreSQL refuses a NUL in a query (a 500)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return super().to_internal_value(data)
