"""gangway's command line: request, watch, connect to and tear down Ray clusters and jobs.

It speaks only the public REST API (``/api/v1/``) over HTTP and imports nothing of the
server (an import-linter contract in ``.importlinter`` keeps it so): an engineer needs a
URL and a sign-in, never a database or Kubernetes credentials. See docs/cli.md.
"""

__version__ = "0.1.0"
