"""Routes of the tenants API (users, tokens, flavors, tenants, members, quotas, audit)."""

urlpatterns: list = []
