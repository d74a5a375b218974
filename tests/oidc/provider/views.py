"""The provider's own pages: discovery with the device endpoint, and two tiny helpers."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.views import ConnectDiscoveryInfoView
from oauth2_provider.views import DeviceAuthorizationView as DotDeviceAuthorizationView


class DiscoveryView(ConnectDiscoveryInfoView):
    """DOT's OpenID discovery document plus ``device_authorization_endpoint`` (RFC 8628
    section 4), which DOT 3.4.1 publishes only in its RFC 8414 metadata, its token
    revocation endpoint (RFC 7009, as Keycloak and Okta publish theirs), and the grant
    types the provider's clients use."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["device_authorization_endpoint"] = self._get_endpoint_url(
            request, "device-authorization", required=True
        )
        data["revocation_endpoint"] = self._get_endpoint_url(request, "revoke-token", required=True)
        data["grant_types_supported"] = [
            "authorization_code",
            "refresh_token",
            "password",
            "urn:ietf:params:oauth:grant-type:device_code",
        ]
        extended = JsonResponse(data)
        extended["Access-Control-Allow-Origin"] = "*"
        return extended


class DeviceAuthorizationView(DotDeviceAuthorizationView):
    """DOT's device authorization endpoint, made to work with oauthlib 4.

    oauthlib 4.0.1 adds the resolved ``scope`` to the device authorization response (not
    an RFC 8628 field), and DOT 3.4.1 builds its ``DeviceCodeResponse`` dataclass from that
    response, which has no ``scope`` field: every request failed with a TypeError. The
    field is dropped here; DOT then stores the requested scope, or the client's default
    scopes, on the device grant, as it was written to.
    """

    def create_device_authorization_response(self, request: HttpRequest) -> Any:
        headers, response, status = super().create_device_authorization_response(request)
        if status == 200 and isinstance(response, dict):
            response = {name: value for name, value in response.items() if name != "scope"}
        return headers, response, status


def me(request: HttpRequest) -> JsonResponse:
    """Who this browser session is signed in as: tests read it to see a logout happen."""
    user = request.user
    return JsonResponse(
        {
            "authenticated": bool(user.is_authenticated),
            "username": user.get_username() if user.is_authenticated else None,
        }
    )


def home(request: HttpRequest) -> HttpResponse:
    """Where RP-initiated logout lands when no post_logout_redirect_uri is given."""
    return HttpResponse("gangway test OpenID provider\n", content_type="text/plain")
