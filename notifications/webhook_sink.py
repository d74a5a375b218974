"""A demo webhook receiver: ``make run``'s own, so webhooks can be seen working.

``python -m notifications.webhook_sink --port 8125 --dir var/webhooks`` listens on
loopback; each POST is answered 200 and kept as one JSON file (path, ``X-Gangway-*``
headers, the body as sent). ``GET /`` lists what arrived, newest first. It checks no
signature: it cannot know the secret a tenant was shown. It is reachable only because
make run names it in ``NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from notifications.sink_command import sink_arguments

MAX_BODY = 1 << 20


def _handler(directory: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._answer(413, {"error": "too large"})
                return
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            record = {
                "received_at": stamp,
                "path": self.path,
                "headers": {k: v for k, v in self.headers.items() if k.lower().startswith("x-")},
                "body": body,
            }
            name = f"{stamp}-{uuid.uuid4().hex[:12]}.json"
            partial = directory / f".{name}.part"
            partial.write_text(json.dumps(record, indent=2))
            os.replace(partial, directory / name)
            event = self.headers.get("X-Gangway-Event", "?")
            text = body.get("text", "") if isinstance(body, dict) else ""
            print(f"webhook {event}: {text} ({name})", flush=True)
            self._answer(200, {"ok": True})

        def do_GET(self) -> None:
            names = sorted((p.name for p in directory.glob("*.json")), reverse=True)[:100]
            self._answer(200, [json.loads((directory / n).read_text()) for n in names])

        def _answer(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass  # one line per webhook is printed above; no access log

    return Handler


def main(argv: list[str] | None = None) -> int:
    args = sink_arguments(__doc__.splitlines()[0], argv)
    directory = args.dir
    server = ThreadingHTTPServer((args.host, args.port), _handler(directory))
    server.daemon_threads = True

    def _stop(*_: Any) -> None:
        # shutdown() waits for serve_forever() to return: not from its own thread.
        threading.Thread(target=server.shutdown).start()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    print(f"webhook receiver on http://{args.host}:{args.port}/, writing to {directory}")
    sys.stdout.flush()
    with server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
