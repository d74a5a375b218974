"""The fleet's members as a platform admin manages them: register, change, cordon and
remove a Kubernetes cluster, check its credentials on save, probe its health and rotate
the keys its secrets are sealed with (docs/fleet.md)."""
