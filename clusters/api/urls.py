"""Routes of the clusters API (cluster requests, dry-run, manifests, queue, usage)."""

urlpatterns: list = []
