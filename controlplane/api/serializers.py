"""Serializer bases shared by every app's API.

Request bodies are strict: a key the serializer does not declare is a 400 naming the
key, rather than being silently dropped. A typo such as ``gpu`` for ``gpus`` would
otherwise succeed while doing something other than what the caller meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class JsonIntegerField(serializers.IntegerField):
    """An integer the body gives as a JSON number without a fraction, nothing else.

    DRF's ``IntegerField`` also takes ``1.0`` (it strips a zero fraction) and ``"8"``,
    which the schema (``type: integer``) does not allow; the schema fuzzer found the same
    looseness in the query string (``page_size=180.0``, see :class:`QueryIntegerField`).
    """

    default_error_messages = {"invalid": "Must be a whole number (a JSON integer)."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class JsonStringField(serializers.CharField):
    """A string the body gives as a JSON string, nothing else.

    DRF's ``CharField`` also takes a number and keeps its text (``5.98e+113`` became the
    description ``"5.980184939800577e+113"``), which the schema (``type: string``) does
    not allow: the schema fuzzer found it on ``PUT /cohorts/{name}/``.
    """

    default_error_messages = {"invalid": "Must be a string (a JSON string)."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictFieldsMixin(serializers.Serializer):
    """Refuses input keys that are not writable fields of the serializer; put it before
    the serializer class it applies to."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in writable)
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    """A plain input serializer that refuses unknown keys."""


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    """A model-backed input serializer that refuses unknown keys and takes a model's
    integer columns as JSON integers only (:class:`JsonIntegerField`) and its text
    columns as JSON strings only (:class:`JsonStringField`)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        **{
            column: {
                serializers.IntegerField: JsonIntegerField,
                serializers.CharField: JsonStringField,
            }.get(field, field)
            for column, field in serializers.ModelSerializer.serializer_field_mapping.items()
        },
    }


class EmptyBodyIn(StrictSerializer):
    """The body of an action that takes none (suspend, resume): absent or ``{}``.

    Any key is an unknown field, so ``{"hours": 4}`` sent to the wrong action is a 400
    rather than a suspend that looks like it honoured the hours.
    """


class JsonBooleanField(serializers.BooleanField):
    """A boolean the body gives as JSON ``true`` or ``false``, nothing else.

    DRF's ``BooleanField`` also takes ``0``, ``1.0``, ``"yes"`` and ``"off"``, which the
    schema (``type: boolean``) does not allow; the schema fuzzer's first find at 100
    examples per operation was ``"email": 0.0`` accepted as ``false``.
    """

    default_error_messages = {"invalid": "Must be true or false (a JSON boolean)."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid")


class QueryIntegerField(serializers.IntegerField):
    """An integer a query string gives in decimal digits, nothing else.

    DRF's ``IntegerField`` also takes ``180.0`` (it strips a zero fraction), which the
    schema (``type: integer``) does not allow: the schema fuzzer found ``page_size=180.0``
    answered 200 where the schema promised a 400.
    """

    def to_internal_value(self, data: Any) -> int:
        text = str(data).strip()
        digits = text[1:] if text[:1] in "+-" else text
        if not digits.isascii() or not digits.isdigit():
            self.fail("invalid")
        return super().to_internal_value(text)
