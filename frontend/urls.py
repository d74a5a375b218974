"""Dashboard routes."""

urlpatterns: list = []
