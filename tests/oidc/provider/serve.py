"""Start the test OpenID provider: ``python -m tests.oidc.provider.serve --data-dir DIR``.

It binds 127.0.0.1 first (``--port 0``, the default, takes a free port), because the issuer
URL, which Django's settings need, contains the port. Then it sets up Django with the
provider's settings (never gangway's, whatever DJANGO_SETTINGS_MODULE says), migrates the
SQLite database in DIR, seeds the three clients, writes the port to DIR/port (written
whole, by a rename, so a reader never sees half of it), prints the issuer and serves
with one thread per request until killed.

``--prepare`` migrates and seeds DIR/provider.sqlite3 and exits without serving: the
pytest fixture does this once per session and copies the file for each provider, so a
provider starts without running migrations.

The clients (secrets are test values; ``--web-secret`` changes gangway-web's):

* ``gangway-web`` - confidential, authorization code + refresh, PKCE S256 required, no
  consent page; redirect URIs are set later through the control API.
* ``gangway-cli`` - public, device code + refresh, no consent page.
* ``gangway-test`` - confidential, password + refresh: real tokens in one request.
"""

from __future__ import annotations

import argparse
import os
import socketserver
import sys
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

WEB_CLIENT_SECRET = "gangway-web-secret"
TEST_CLIENT_SECRET = "gangway-test-secret"


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request: a browser's parallel requests, and a
    test polling the token endpoint while another request is in flight, do not queue."""

    daemon_threads = True


class Handler(WSGIRequestHandler):
    def address_string(self) -> str:  # no reverse DNS lookups in the access log
        return str(self.client_address[0])


def _not_ready(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
    return [b"starting\n"]


def seed_clients(web_secret: str) -> None:
    from oauth2_provider.models import get_application_model

    application = get_application_model()
    common = {"skip_authorization": True, "algorithm": application.RS256_ALGORITHM}
    application.objects.update_or_create(
        client_id="gangway-web",
        defaults={
            **common,
            "name": "gangway (browser)",
            "client_type": application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": application.GRANT_AUTHORIZATION_CODE,
            "client_secret": web_secret,
        },
    )
    application.objects.update_or_create(
        client_id="gangway-cli",
        defaults={
            **common,
            "name": "gangway CLI",
            "client_type": application.CLIENT_PUBLIC,
            "authorization_grant_type": application.GRANT_DEVICE_CODE,
            "client_secret": "",
        },
    )
    application.objects.update_or_create(
        client_id="gangway-test",
        defaults={
            **common,
            "name": "gangway tests (password grant)",
            "client_type": application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": application.GRANT_PASSWORD,
            "client_secret": TEST_CLIENT_SECRET,
        },
    )


def setup_django(data_dir: Path, origin: str) -> None:
    os.environ["OIDC_PROVIDER_DATA_DIR"] = str(data_dir)
    os.environ["OIDC_PROVIDER_ORIGIN"] = origin
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc.provider.settings"
    import django

    django.setup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--web-secret", default=os.environ.get("OIDC_WEB_SECRET", WEB_CLIENT_SECRET)
    )
    parser.add_argument("--prepare", action="store_true", help="migrate and seed, then exit")
    args = parser.parse_args(argv)
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)

    server = None
    origin = "http://127.0.0.1:0"
    if not args.prepare:
        server = make_server(
            "127.0.0.1",
            args.port,
            _not_ready,
            server_class=ThreadingWSGIServer,
            handler_class=Handler,
        )
        origin = f"http://127.0.0.1:{server.server_port}"
    setup_django(data_dir, origin)

    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0, interactive=False)
    seed_clients(args.web_secret)
    if server is None:
        return
    server.set_app(get_wsgi_application())
    port_file = data_dir / "port"
    tmp = data_dir / "port.tmp"
    tmp.write_text(str(server.server_port))
    tmp.replace(port_file)
    print(f"OpenID provider at {origin}/o", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
