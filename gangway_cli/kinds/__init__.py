"""The workload kinds the command line knows, one module each: what the shared commands
(:mod:`gangway_cli.commands.workloads`) show of the kind, and the commands only it has.

They describe the kinds from the API's side, apart from the server's ``clusters/kinds``:
the command line is an HTTP client that imports nothing of the server (nor Django).
Adding a kind adds a module and a line below.
"""

from gangway_cli import exitcodes
from gangway_cli.kinds import raycluster, rayjob, rayservice, service_tokens

# Importing a kind's module registers its commands, the shared ones included.
KINDS = (raycluster.KIND, rayjob.KIND, rayservice.KIND)
# A service's own sub-commands (``service token ...``), registered on import.
SUBCOMMANDS = (service_tokens.token_app,)
# Every exit code: those all commands share and each kind's own.
EXIT_CODES = sorted([*exitcodes.TABLE, *(code for kind in KINDS for code in kind.exit_codes)])
