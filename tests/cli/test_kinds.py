"""The workload kinds of the command line (gangway_cli/kinds): every kind gets the
shared commands under its own words, and only the options it offers."""

from __future__ import annotations

from typer.testing import CliRunner

import gangway_cli.main  # noqa: F401  (the root options and every command)
from gangway_cli.app import app
from gangway_cli.kinds import KINDS, raycluster, rayjob, rayservice

runner = CliRunner()


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_kind_has_the_shared_commands_on_its_own_app() -> None:
    assert [k.noun for k in KINDS] == ["cluster", "job", "service"]
    for kind in KINDS:
        names = {command.name for command in kind.app.registered_commands}
        assert {"ls", "status", kind.delete_command} <= names
    assert raycluster.KIND.app is app
    assert rayjob.KIND.delete_command == "rm"
    assert rayservice.KIND.delete_command == "rm"


def test_the_shared_commands_speak_of_their_kind() -> None:
    assert "The cluster's name" in _help("status")
    assert "The job's name" in _help("job", "status")
    assert "Delete a job" in _help("job", "rm")
    assert "The service's name" in _help("service", "status")
    assert "--config" in _help("service", "submit") and "--config" in _help("service", "upgrade")


def test_a_kind_offers_only_its_own_options() -> None:
    assert "--state" in _help("ls") and "--mine" in _help("ls")
    assert "--wait" in _help("down")
    assert "--state" not in _help("job", "ls") and "--mine" not in _help("job", "ls")
    assert "--wait" not in _help("job", "rm")
