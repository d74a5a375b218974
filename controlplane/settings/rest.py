"""The REST API: Django REST framework, knox tokens and the OpenAPI schema."""

from __future__ import annotations

from datetime import timedelta

from controlplane.env import env_int, env_str
from controlplane.settings.core import DEBUG
from controlplane.settings.security import TRUSTED_PROXY_COUNT

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.api.authentication.TokenAuthentication",
        # "Authorization: Bearer <JWT>" from the identity provider, when SSO is on.
        "tenants.sso.authentication.BearerAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only, with bounded nesting and numbers (controlplane/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["controlplane.api.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "controlplane.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "controlplane.api.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "controlplane.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    # An unknown ?format= is a 406 naming the formats offered (not DRF's bare 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "controlplane.api.negotiation.ContentNegotiation",
    # OPTIONS names the methods the caller may use, and refuses whom every method refuses.
    "DEFAULT_METADATA_CLASS": "controlplane.api.metadata.Metadata",
    "DEFAULT_THROTTLE_RATES": {
        "auth": env_str("THROTTLE_AUTH", "20/min"),
        "write": env_str("THROTTLE_WRITE", "600/min"),
    },
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Our throttles read the address through controlplane.addresses; this keeps any
    # stock DRF throttle from trusting the raw header (its default is None).
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
}

REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=env_int("API_TOKEN_TTL_HOURS", 24 * 30, minimum=1)),
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gangway API",
    "DESCRIPTION": "Multi-tenant control plane for GPU Ray clusters on Kubernetes.",
    "VERSION": "1.0.0",
    # 3.1: a nullable reference is ``oneOf: [$ref, {type: null}]``; 3.0's
    # ``allOf: [$ref], nullable: true`` reads as never null to strict validators.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.api.schema.null_as_a_type",
    ],
    # The notification kinds are one choice set wherever they appear.
    "ENUM_NAME_OVERRIDES": {
        "NotificationKindEnum": "notifications.event_kinds.EventKind",
        "ClusterKindEnum": "clusters.models.ClusterKind",
        "TopologyModeEnum": "clusters.models.TopologyMode",
    },
}
