"""Live reads of Kubernetes for the interfaces: the Ray dashboard proxy, pod and driver
logs, the fleet view. The interfaces reach the gateway through this package only."""
