"""Working on a running cluster: its Ray dashboard through the control plane (proxy.py)
and its pods' logs (logs.py)."""
