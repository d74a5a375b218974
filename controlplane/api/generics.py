"""DRF's generic base classes, with their type parameters for mypy's strict checks.

djangorestframework-stubs makes ``Serializer``, ``ModelSerializer``, ``SlugRelatedField``
and ``ListAPIView`` generic, but at run time the classes cannot be subscripted, so the
parameterised forms exist only for the type checker; at run time these names are DRF's
own classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import generics, serializers

if TYPE_CHECKING:
    Serializer = serializers.Serializer[Any]
    ModelSerializer = serializers.ModelSerializer[Any]
    SlugRelatedField = serializers.SlugRelatedField[Any]
    ListAPIView = generics.ListAPIView[Any]
else:
    Serializer = serializers.Serializer
    ModelSerializer = serializers.ModelSerializer
    SlugRelatedField = serializers.SlugRelatedField
    ListAPIView = generics.ListAPIView

__all__ = ["ListAPIView", "ModelSerializer", "Serializer", "SlugRelatedField"]
