"""Start-up checks of what a production process needs beyond its settings.

Deploy checks: the collected static files (without the hashed manifest every page would
answer 500 while ``/healthz`` stays green, so the web server refuses to start instead,
see ``wsgi.py``/``asgi.py``), and a cache shared by every web process (lockouts and
throttles count in it). They are deploy checks because ``migrate``, the worker and
``collectstatic`` have no use for static files. One check runs with every command: the
Ray image allow-list must name image references and include the default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import storages

_HINT = "Run `python manage.py collectstatic --noinput` with the same settings before starting."


def static_manifest_errors() -> list[checks.CheckMessage]:
    """What keeps the hashed static files from being served; empty when nothing does.

    Only manifest storages need collecting first; the development storage serves the
    files where they are. A manifest is stale when a file the finders see (an app's
    static file) has no entry in it: the image was built before that file existed.
    """
    try:
        # A manifest storage reads its manifest when it is made: a corrupt one raises.
        storage = storages["staticfiles"]
    except ValueError as exc:
        where = Path(settings.STATIC_ROOT) / "staticfiles.json"
        return [
            checks.Error(
                f"The static files manifest {where} is unreadable: {exc}",
                hint=_HINT,
                id="gangway.E003",
            )
        ]
    if not isinstance(storage, ManifestFilesMixin):
        return []
    where = Path(storage.manifest_storage.path(storage.manifest_name))
    manifest = storage.read_manifest()
    if manifest is None:
        return [
            checks.Error(
                f"The static files have not been collected: {where} is missing, so every "
                "page (dashboard, admin, /api/docs/) would answer 500.",
                hint=_HINT,
                id="gangway.E001",
            )
        ]
    ignore = apps.get_app_config("staticfiles").ignore_patterns  # type: ignore[attr-defined]
    missing = sorted(
        path
        for finder in get_finders()
        for path, _source in finder.list(ignore)
        if storage.hash_key(storage.clean_name(path)) not in storage.hashed_files
    )
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        shown = ", ".join(missing[:3]) + more
        return [
            checks.Error(
                f"The static files manifest {where} is older than the code: {shown} "
                "are not in it, so pages using them would answer 500.",
                hint=_HINT,
                id="gangway.E002",
            )
        ]
    return []


@checks.register(checks.Tags.staticfiles, deploy=True)
def check_static_manifest(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: the collected static files match the code."""
    return static_manifest_errors()


def require_static_manifest() -> None:
    """Stop a web server from starting when it could not serve its pages."""
    errors = static_manifest_errors()
    if errors:
        raise ImproperlyConfigured(f"{errors[0].msg} {errors[0].hint}")


@checks.register(checks.Tags.security, checks.Tags.caches, deploy=True)
def shared_cache(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Sign-in lockouts and API throttles count in the cache: in a process-local cache
    each gunicorn worker and pod keeps its own count, multiplying every limit."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend != "django.core.cache.backends.locmem.LocMemCache":
        return []
    return [
        checks.Warning(
            "The cache is local to each process, so sign-in lockouts and API throttles "
            "are counted per gunicorn worker.",
            hint="Set CACHE_URL to a Redis that every web process shares.",
            id="gangway.W001",
        )
    ]


# An image reference: [registry[:port]/]path[:tag][@sha256:digest], path components in
# lower case as the OCI distribution spec has them, a tag of at most 128 characters.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)?"
IMAGE_REFERENCE_RE = re.compile(
    rf"^{_REGISTRY}{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)


def allowlist_faults(allowlist: list[str], default: str) -> list[str]:
    """What is wrong with an image allow-list and its default (empty: nothing): it names
    at least one image, every entry is an image reference, none twice, and the default
    is one of them."""
    faults = [
        f"{ref!r} is not an image reference."
        for ref in allowlist
        if not IMAGE_REFERENCE_RE.match(ref)
    ]
    twice = sorted({ref for ref in allowlist if allowlist.count(ref) > 1})
    if twice:
        faults.append(f"Named more than once: {', '.join(twice)}.")
    if not allowlist:
        faults.append("It is empty: no request could name an image.")
    elif default not in allowlist:
        faults.append(f"The default image {default!r} (RAY_IMAGE_DEFAULT) is not in it.")
    return faults


@checks.register()
def image_allowlist(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every command: ``RAY_IMAGE_ALLOWLIST`` is a list of image references holding
    ``RAY_IMAGE_DEFAULT``, so that every request (which gets the default when it names
    no image) can be served."""
    return [
        checks.Error(
            f"RAY_IMAGE_ALLOWLIST: {fault}",
            hint="Set RAY_IMAGE_ALLOWLIST to comma-separated image references that include "
            "RAY_IMAGE_DEFAULT.",
            id="gangway.E004",
        )
        for fault in allowlist_faults(
            list(settings.RAY_IMAGE_ALLOWLIST), str(settings.RAY_IMAGE_DEFAULT)
        )
    ]
