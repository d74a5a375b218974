"""Fast tests of the CLI's pure parts: durations, following a log tail, error mapping
(API error body -> message, hint, exit code) and output formatting."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gangway_cli import exitcodes, kinds, output
from gangway_cli.durations import format_seconds, parse_hours, parse_seconds
from gangway_cli.errors import CliError, from_response
from gangway_cli.follow import new_lines
from gangway_cli.kinds import rayjob


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("8h", 28800),
        ("90m", 5400),
        ("2h30m", 9000),
        ("45s", 45),
        ("1d", 86400),
        ("8", 28800),
        (" 1H 5M ", 3900),
    ],
)
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "8x", "2h-3m", "0h", "eight hours", "-1h"])
def test_bad_durations_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_seconds(text)


def test_hours_must_be_whole() -> None:
    assert parse_hours("2h") == 2 and parse_hours("1d") == 24 and parse_hours("120m") == 2
    with pytest.raises(ValueError, match=r"whole number of hours.*try 2h"):
        parse_hours("90m")
    assert format_seconds(9000) == "2h30m" and format_seconds(45) == "45s"


def test_new_lines_of_a_moving_tail() -> None:
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b"], ["a", "b"]) == []
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]  # scrolled by one
    assert new_lines(["a", "b"], ["x", "y"]) == ["x", "y"]  # more came than the tail holds
    assert new_lines(["x", "x"], ["x", "x", "x"]) == ["x"]


def _error(status: int, code: str = "", message: str = "", **kw: Any) -> CliError:
    body = {"error": {"code": code, "message": message}} if code else "<html>oops</html>"
    return from_response(status, body, server="https://gw.example", **kw)


def test_error_bodies_map_to_messages_hints_and_exit_codes() -> None:
    expired = _error(401, "authentication_failed", "Invalid token.")
    assert expired.code == exitcodes.AUTH and "expired or was revoked" in expired.message
    assert "gangway login --server https://gw.example" in expired.hint
    missing = _error(404, "not_found", "Not found.", what="cluster 'x' in tenant 'acme'")
    assert missing.code == exitcodes.NOT_FOUND
    assert missing.message == "cluster 'x' in tenant 'acme' was not found"
    never = _error(400, "never_fits", "2 x 8 H100 exceed acme's quota")
    assert never.code == exitcodes.NEVER_FITS and "quota" in never.message
    invalid = _error(400, "invalid", "flavor: No GPU flavor named 'a100'.")
    assert invalid.code == exitcodes.REFUSED and invalid.message.startswith("flavor:")
    assert _error(403, "permission_denied", "Engineers only.").code == exitcodes.REFUSED
    assert "gangway status" in _error(409, "not_ready", "Not ready.").hint
    assert "wait" in _error(429, "throttled", "Slow down.").hint
    crash = _error(502)
    assert crash.code == exitcodes.ERROR and "HTTP 502" in crash.message


def test_exit_codes_are_distinct_and_documented() -> None:
    codes = [code for code, _ in kinds.EXIT_CODES]
    assert len(codes) == len(set(codes))
    assert {exitcodes.AUTH, exitcodes.NEVER_FITS, rayjob.FAILED} <= set(codes)


def test_relative_times_and_queue_lines() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    later = (now + timedelta(hours=2, minutes=5)).isoformat()
    assert output.when(later, now=now) == "in 2h05m"
    assert output.when((now - timedelta(minutes=12)).isoformat(), now=now) == "12m ago"
    assert output.when(None) == "" and output.when(now.isoformat(), now=now) == "now"
    line = output.queue_line(
        {"position": 2, "reason": "tenant_quota", "message": "acme uses 16 of 16", "eta": None},
        "acme",
    )
    assert line == "#2 in acme's queue, tenant_quota: acme uses 16 of 16"


def test_json_output_is_the_data_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    data = [{"name": "a", "gpus": 1.5, "env": {"K": "\u00e9"}}]
    output.emit(output.JSON, data, lambda: pytest.fail("no table in json mode"))
    assert json.loads(capsys.readouterr().out) == data


def test_an_error_in_json_mode_prints_the_apis_body(capsys: pytest.CaptureFixture[str]) -> None:
    body = {"error": {"code": "never_fits", "message": "too big"}}
    output.print_error(CliError("too big", hint="ask for less", body=body), output.JSON)
    captured = capsys.readouterr()
    assert json.loads(captured.out) == body
    assert "error: too big" in captured.err and "hint: ask for less" in captured.err


def test_the_kube_cluster_line_says_where_and_whether_it_is_stale() -> None:
    assert output.placement({"kube_cluster": None}) == ""
    assert output.placement({"kube_cluster": "cloud", "stale": False}) == "cloud"
    since = (datetime.now(UTC) - timedelta(minutes=3)).isoformat()
    line = output.placement({"kube_cluster": "cloud", "stale": True, "stale_since": since})
    assert line == "cloud (unreachable: state as last seen 3m ago)"


def test_the_topology_line_says_the_level_the_mode_and_the_pinned_domain() -> None:
    rack = "network.topology.kubernetes.io/rack"
    assert output.topology({"topology_level": "", "topology_domain": ""}) == ""
    assert output.topology({"topology_level": rack, "topology_mode": "preferred"}) == (
        f"{rack} (preferred)"
    )
    pinned = {"topology_level": rack, "topology_mode": "required", "topology_domain": "r-0"}
    assert output.topology(pinned) == f"{rack} (required), pinned to r-0"
