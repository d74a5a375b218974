"""What commands print: rich tables for people, or exactly the API's JSON for scripts.

``--output json`` prints the API's JSON verbatim (for a list, every item across its
pages, as one JSON array) on stdout and nothing else there; progress and notes go to
stderr in both modes, so ``gangway up -o json | jq`` sees only the cluster.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gangway_cli.errors import CliError

JSON = "json"
TABLE = "table"
MODES = (TABLE, JSON)

# Piped output has no terminal width: rich would squeeze tables into 80 columns and cut
# URLs short, so it gets a wide page instead (COLUMNS still wins when set).
_PIPE_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
stdout = Console(highlight=False, width=_PIPE_WIDTH)
stderr = Console(stderr=True, highlight=False)

STATE_STYLES = {
    "ready": "green",
    "running": "green",
    "succeeded": "green",
    "queued": "yellow",
    "admitted": "cyan",
    "provisioning": "cyan",
    "starting": "cyan",
    "suspended": "magenta",
    "deleting": "dim",
    "deleted": "dim",
    "stopped": "dim",
    "failed": "red",
}


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (not through rich: no markup, no wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def emit(mode: str, data: Any, table: Callable[[], None]) -> None:
    """Print ``data`` as JSON, or call ``table`` to render it for people."""
    if mode == JSON:
        print_json(data)
    else:
        table()


def state_text(state: str | None) -> str:
    """A state with its colour (rich markup)."""
    state = state or "?"
    style = STATE_STYLES.get(state, "")
    return f"[{style}]{state}[/]" if style else state


def when(value: str | None, *, now: datetime | None = None) -> str:
    """An API timestamp as people read it: ``in 3h``, ``12m ago`` (empty for None)."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    now = now or datetime.now(UTC)
    seconds = (moment - now).total_seconds()
    amount = _span(abs(seconds))
    if abs(seconds) < 60:
        return "now"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def clock(value: str | None) -> str:
    """An API timestamp as a local wall-clock time (``14:03:07``), with the date when it
    is not today: for timelines, where "now" for every line would say nothing."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return value
    today = datetime.now().astimezone().date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M")


def _span(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    return f"{hours // 24}d"


def table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> Table:
    """A rich table of strings (None shows as empty)."""
    out = Table(title=title, title_justify="left", header_style="bold", box=None, pad_edge=False)
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*("" if cell is None else str(cell) for cell in row))
    return out


def fields(pairs: Iterable[tuple[str, Any]]) -> Table:
    """A two-column ``name  value`` table, skipping empty values."""
    out = Table(show_header=False, box=None, pad_edge=False)
    out.add_column(style="bold", no_wrap=True)
    out.add_column(overflow="fold")
    for name, value in pairs:
        if value not in (None, "", [], {}):
            out.add_row(name, str(value))
    return out


def queue_line(queue: dict[str, Any] | None, tenant: str = "") -> str:
    """Where a waiting request stands, in one line: ``#2 in acme's queue (capacity:
    all 8 h100 busy), starts in 40m``."""
    if not queue:
        return ""
    parts = []
    if queue.get("position"):
        parts.append(f"#{queue['position']} in {tenant + chr(39) + 's' if tenant else 'the'} queue")
    reason = queue.get("reason") or ""
    message = queue.get("message") or ""
    if reason or message:
        parts.append(f"{reason}: {message}" if reason and message else reason or message)
    if queue.get("eta"):
        parts.append(f"expected to start {when(queue['eta'])}")
    return ", ".join(parts)


def flavor(item: dict[str, Any]) -> str:
    """The flavor a cluster or job got once admitted (``flavor``); until then, the ones it
    accepts in order (``flavors``: ``l4,h100``)."""
    accepted = [str(name) for name in item.get("flavors") or []]
    if item.get("admitted_at") or not accepted:
        return str(item.get("flavor") or "")
    return ",".join(accepted)


def placement(item: dict[str, Any]) -> str:
    """The Kubernetes cluster of the fleet a request runs on, and whether what gangway
    shows of it is stale (that cluster does not answer); empty until it is placed."""
    where = str(item.get("kube_cluster") or "")
    if where and item.get("stale"):
        since = item.get("stale_since")
        return f"{where} (unreachable: state as last seen{' ' + when(since) if since else ''})"
    return where


def topology(item: dict[str, Any]) -> str:
    """The level a production gang keeps its workers in and the domain it is pinned to:
    ``network.topology.kubernetes.io/rack (required), pinned to h100-rack-0``; empty
    when it asks for none."""
    level = str(item.get("topology_level") or "")
    if not level:
        return ""
    line = f"{level} ({item.get('topology_mode') or 'required'})"
    domain = str(item.get("topology_domain") or "")
    return f"{line}, pinned to {domain}" if domain else line


def print_error(error: CliError, mode: str) -> None:
    """The error on stderr; with ``-o json`` also, on stdout, the API's answer that
    carries it (an error body, or the dry-run's ``never_fits`` verdict), else a body in
    the API's error shape, so that scripts parse every failure."""
    if mode == JSON:
        body = error.body if isinstance(error.body, dict) else None
        print_json(body or {"error": {"code": "cli_error", "message": error.message}})
    stderr.print(f"[red]error:[/] {escape(error.message)}", highlight=False)
    if error.hint:
        stderr.print(f"[dim]hint:[/] {escape(error.hint)}", highlight=False)
