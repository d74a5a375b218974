"""DOT's OAuth2Validator with gangway's claims in ID tokens and userinfo, and the device
code check oauthlib 4 asks for.

``get_additional_claims`` takes no request, which tells DOT the claims are request-agnostic:
it then lists them in discovery's ``claims_supported`` and calls each value with the
request. ``oidc_claim_scope`` says which scope releases each claim (``groups`` for groups).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jwcrypto import jwk, jws
from oauth2_provider.models import get_device_grant_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc8628.grant_types import DeviceCodeGrant

from tests.oidc.provider import keys


def group_names(user: Any) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


class ProviderValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self) -> dict[str, Callable[[Any], Any]]:  # type: ignore[override]
        return {
            "preferred_username": lambda r: r.user.get_username(),
            "name": lambda r: r.user.get_full_name() or r.user.get_username(),
            "email": lambda r: r.user.email,
            "email_verified": lambda r: bool(r.user.email),
            "groups": lambda r: group_names(r.user),
        }

    def _get_key_for_token(self, token: str) -> jwk.JWK | None:
        """DOT picks the active key for an ID token it reads back (RP-initiated logout's
        id_token_hint); pick the key its ``kid`` names instead, so a hint signed before a
        rotation is still accepted, as its JWKS promises."""
        key = super()._get_key_for_token(token)  # None unless ``aud`` names a client
        if key is None:
            return None
        unverified = jws.JWS()
        unverified.deserialize(token)
        header = unverified.jose_header
        if isinstance(header, str):
            header = json.loads(header)
        by_kid = keys.key_for_kid(str(header.get("kid", "")))
        return by_kid or key

    def validate_device_code(
        self, client_id: str, code: str, request: Any, *args: Any, **kwargs: Any
    ) -> str | None:
        """The status of a device code being polled for (RFC 8628 section 3.5).

        oauthlib 4.0.1's device code grant asks the validator for it; DOT 3.4.1 predates
        that hook and has no such method (every poll failed with an AttributeError). The
        code must have been issued to the polling client. An approved code gives its user
        and scopes to the token, as DOT's own pre-token hook also does.
        """
        grant = (
            get_device_grant_model()
            .objects.filter(device_code=code, client_id=client_id)
            .select_related("user")
            .first()
        )
        if grant is None:
            return None
        if grant.is_expired():
            return DeviceCodeGrant.DEVICE_CODE_EXPIRED
        if grant.status == grant.AUTHORIZED:
            request.user = grant.user
            request.scopes = grant.scope.split()
            return DeviceCodeGrant.DEVICE_CODE_AUTHORIZED
        if grant.status == grant.DENIED:
            return DeviceCodeGrant.DEVICE_CODE_DENIED
        return DeviceCodeGrant.DEVICE_CODE_PENDING

    def save_bearer_token(self, token: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        """Once a device code has given its tokens it is spent (RFC 8628 section 3.5 lets
        a code be exchanged once): the next poll with it gets ``expired_token``. DOT 3.4.1
        would hand out tokens again for every poll."""
        saved = super().save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "urn:ietf:params:oauth:grant-type:device_code":
            device_grant = get_device_grant_model()
            device_grant.objects.filter(device_code=request.device_code).update(
                status=device_grant.EXPIRED
            )
        return saved
