"""Django settings for the gangway control plane, read from the environment only.

Development needs no configuration: with nothing set, ``DEBUG`` is on, the database and
the broker are SQLite files under ``var/``, so ``make run`` works on a fresh machine.
Production sets ``DEBUG=0``, a ``SECRET_KEY`` (or ``SECRET_KEY_FILE``), ``ALLOWED_HOSTS``
and real URLs; every hardening setting then defaults to on. ``.env.example`` lists every
variable. One module per concern; each imports what it reads from another, so the order
of the imports below does not matter.
"""

from controlplane.settings.beat import *  # noqa: F403
from controlplane.settings.core import *  # noqa: F403
from controlplane.settings.k8s import *  # noqa: F403
from controlplane.settings.notices import *  # noqa: F403
from controlplane.settings.rest import *  # noqa: F403
from controlplane.settings.security import *  # noqa: F403
from controlplane.settings.single_sign_on import *  # noqa: F403
from controlplane.settings.workers import *  # noqa: F403
