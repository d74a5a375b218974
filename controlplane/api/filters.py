"""Query-parameter filters that refuse what they cannot use, rather than ignoring it.

Out of the box, ``?sharing=maybe`` and ``?ordering=bogus`` are silently dropped (the
caller gets an unfiltered, default-ordered list and cannot tell), and a date-time may
carry any UTC offset Python accepts (up to ±23:59) although PostgreSQL refuses offsets
past ±15:59 (a 500). Here each is a 400 naming the parameter, date-times are compared
in UTC (as DRF's serializer fields already do), and the schema lists the orderings.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField
from rest_framework import filters, serializers
from rest_framework.request import Request


class UtcDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, converted to UTC."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError as exc:
            raise ValidationError("Out of the supported range.", code="overflow") from exc


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """Filters on an ISO 8601 date-time, compared in UTC."""

    field_class = UtcDateTimeField


class StrictBooleanField(forms.NullBooleanField):
    """``true``/``false`` (or ``1``/``0``); anything else is an error, not "no filter"."""

    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]
        if value in (None, ""):
            return None
        parsed = super().to_python(value)
        if parsed is None:
            raise ValidationError("Use true or false.", code="invalid")
        return parsed


class StrictBooleanFilter(django_filters.BooleanFilter):
    """Filters on a boolean given as ``true`` or ``false``."""

    field_class = StrictBooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The default select widget maps anything it does not know to "unknown" before
        # the field can refuse it; a text input passes the value through as sent.
        kwargs.setdefault("widget", forms.TextInput)
        super().__init__(*args, **kwargs)


class OrderingFilter(filters.OrderingFilter):
    """``?ordering=a,-b`` over the view's ``ordering_fields``; an unknown term is a 400."""

    def remove_invalid_fields(
        self, queryset: Any, fields: Iterable[str], view: Any, request: Request
    ) -> list[str]:
        fields = list(fields)
        valid = list(super().remove_invalid_fields(queryset, fields, view, request))
        unknown = [term for term in fields if term not in valid]
        if unknown:
            offered = ", ".join(self._terms(view)) or "none"
            raise serializers.ValidationError(
                {self.ordering_param: [f"Unknown ordering {unknown[0][:40]!r}; use: {offered}."]}
            )
        return valid

    def _terms(self, view: Any) -> list[str]:
        names = [
            item if isinstance(item, str) else item[0]
            for item in getattr(view, "ordering_fields", None) or []
        ]
        return [term for name in names for term in (name, f"-{name}")]

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        terms = self._terms(view)
        if not terms:
            return []
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": "Comma-separated fields to order by; `-` orders descending.",
                "schema": {"type": "array", "items": {"type": "string", "enum": terms}},
                "style": "form",
                "explode": False,
            }
        ]
