"""Serializers of the notifications API. Webhook secrets appear in one place only: the
response that creates a webhook (or sets a user's webhook URL)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.api import generics as drf
from controlplane.api.serializers import JsonBooleanField, StrictSerializer
from notifications.event_kinds import EventKind
from notifications.models import URL_MAX_LENGTH


class PreferenceLineSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=EventKind.choices)
    title = serializers.CharField(read_only=True)
    email = JsonBooleanField()
    webhook = JsonBooleanField()


class PreferencesInSerializer(StrictSerializer):
    """``{webhook_url?, preferences: [{kind, email, webhook}]}``."""

    webhook_url = serializers.CharField(required=False, allow_blank=True, max_length=URL_MAX_LENGTH)
    preferences = PreferenceLineSerializer(many=True)

    def validate_preferences(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kinds = [line["kind"] for line in value]
        if len(kinds) != len(set(kinds)):
            raise serializers.ValidationError("Name each kind once.")
        return value


class PreferencesOutSerializer(drf.Serializer):
    """The user's choices for every kind, their ``email`` and ``webhook_url``, and
    ``webhook_secret`` only in the response that set a new URL."""

    email = serializers.CharField()
    webhook_url = serializers.CharField()
    preferences = PreferenceLineSerializer(many=True)
    webhook_secret = serializers.CharField(
        required=False,
        help_text="The new webhook's signing secret, shown in this response only.",
    )


class DeliverySerializer(drf.Serializer):
    delivery_id = serializers.UUIDField()
    kind = serializers.CharField()
    channel = serializers.CharField()
    target = serializers.CharField()
    tenant = serializers.CharField(source="tenant.slug")
    cluster = serializers.SerializerMethodField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)

    def get_cluster(self, obj: Any) -> str:
        return str(obj.payload.get("cluster", ""))


class WebhookInSerializer(StrictSerializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=80)
    url = serializers.CharField(max_length=URL_MAX_LENGTH)
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=EventKind.choices),
        min_length=1,
        max_length=len(EventKind.choices),
    )
    active = JsonBooleanField(required=False, default=True)


class WebhookOutSerializer(drf.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    url = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())
    active = JsonBooleanField()
    created_at = serializers.DateTimeField()


class WebhookCreatedSerializer(WebhookOutSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (X-Gangway-Signature), shown in this response only."
    )


class TestSentSerializer(drf.Serializer):
    delivery_id = serializers.UUIDField()
    status = serializers.CharField()
