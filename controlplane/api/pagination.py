"""Pagination for every list endpoint: ``?page=N&page_size=M`` with a bounded page size.

Both parameters are validated like any other input: ``page_size=true``, ``page=abc``,
``page_size=180.0``, ``page=0`` or ``page_size=10000`` are a 400 naming the parameter
(DRF would silently use its default page size, or answer "Invalid page." with a 404).
A page past the last one is a 404. The schema states the same bounds.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from controlplane.api.serializers import QueryIntegerField

MAX_PAGE_SIZE = 500


class PageQueryIn(serializers.Serializer):
    """The pagination query parameters."""

    page = QueryIntegerField(min_value=1, max_value=2**31 - 1, default=1)
    page_size = QueryIntegerField(min_value=1, max_value=MAX_PAGE_SIZE, required=False)


class Pagination(PageNumberPagination):
    """Page-number pagination; clients may ask for up to 500 rows a page."""

    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    last_page_strings = ()

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        query = PageQueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        self._query = query.validated_data
        return super().paginate_queryset(queryset, request, view)

    def get_page_size(self, request: Request) -> int | None:
        return self._query.get("page_size", self.page_size)

    def get_page_number(self, request: Request, paginator: Any) -> int:
        return self._query["page"]

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        bounds = {
            self.page_query_param: {"minimum": 1, "maximum": 2**31 - 1},
            self.page_size_query_param: {"minimum": 1, "maximum": MAX_PAGE_SIZE},
        }
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"].update(bounds[parameter["name"]])
        return parameters
