"""The provider's URLs: DOT under /o/ (so the issuer is <origin>/o), sign-in, control API.

DOT's own ``urlpatterns`` would also mount its application-management pages and dynamic
client registration; the provider takes only the parts it needs, in DOT's namespace, with
the discovery view replaced by one that lists the device endpoint and the device
authorization view by one that works with oauthlib 4 (views.py says why).
"""

from django.contrib.auth.views import LoginView
from django.urls import include, path, re_path
from oauth2_provider import urls as dot_urls

from tests.oidc.provider import control, views

oauth2_patterns = [
    re_path(
        r"^\.well-known/openid-configuration/?$",
        views.DiscoveryView.as_view(),
        name="oidc-connect-discovery-info",
    ),
    *dot_urls.metadata_urlpatterns,
    path(
        "device-authorization/",
        views.DeviceAuthorizationView.as_view(),
        name="device-authorization",
    ),
    *[p for p in dot_urls.base_urlpatterns if p.name != "device-authorization"],
    *[p for p in dot_urls.oidc_urlpatterns if p.name != "oidc-connect-discovery-info"],
]

urlpatterns = [
    path("", views.home),
    path("o/", include((oauth2_patterns, "oauth2_provider"))),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/me/", views.me),
    path("control/", include(control.urlpatterns)),
]
