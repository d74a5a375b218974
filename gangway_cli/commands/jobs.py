"""Job commands: ``job submit``, ``job ls``, ``job status``, ``job logs``, ``job stop``
and ``job rm``, on ``/api/v1/tenants/{tenant}/jobs/``.

``--follow`` polls the job and its driver log (the API serves the log's tail, not a
stream), prints new lines as they come, and exits with the job's outcome: 0 when it
succeeded, 7 when it failed or was stopped.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from gangway_cli import durations, exitcodes, output
from gangway_cli.app import OutputOpt, Session, TenantOpt, job_app, session
from gangway_cli.commands.clusters import flavors_body, parse_env
from gangway_cli.errors import CliError
from gangway_cli.follow import new_lines

POLL_SECONDS = 1.0
ENDED = ("succeeded", "failed", "stopped", "deleting", "deleted")

JobArg = Annotated[str, typer.Argument(help="The job's name (`gangway job ls` lists them).")]


def _path(s: Session, name: str = "", rest: str = "") -> str:
    return s.tenant_path(f"jobs/{name}/{rest}" if name else "jobs/")


def _what(s: Session, name: str) -> str:
    return f"job '{name}' in tenant '{s.tenant()}'"


def _job(s: Session, name: str) -> dict[str, Any]:
    return dict(s.client.get(_path(s, name), what=_what(s, name)))


def outcome_code(job: dict[str, Any]) -> int:
    """The exit code of a job that ended: 0 if it succeeded, else 7."""
    return exitcodes.OK if job.get("state") == "succeeded" else exitcodes.JOB_FAILED


def follow_job(s: Session, name: str, *, log_to_stdout: bool) -> dict[str, Any]:
    """Print the driver's log as it grows and state changes as they happen, until the
    job ends; returns the ended job. Log lines go to stdout (stderr with -o json)."""
    write = sys.stdout.write if log_to_stdout else sys.stderr.write
    seen: list[str] = []
    state = ""
    while True:
        job = _job(s, name)
        if job.get("state") != state:
            state = str(job.get("state"))
            note = job.get("queue") and output.queue_line(job["queue"], s.tenant())
            output.stderr.print(
                f"{escape(name)}: {output.state_text(state)}"
                + (f" - {escape(note)}" if note else "")
            )
        log = s.client.get(_path(s, name, "logs/"), params={"tail": 1000})
        current = str(log.get("text", "")).splitlines()
        for line in new_lines(seen, current):
            write(line + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
        seen = current or seen
        if state in ENDED:
            return job
        time.sleep(POLL_SECONDS)


def _ended(job: dict[str, Any]) -> None:
    run = job.get("job") or {}
    message = run.get("message") or job.get("last_error") or ""
    state = job.get("state")
    colour = "green" if state == "succeeded" else "red"
    output.stderr.print(
        f"[{colour}]{escape(str(job.get('name')))} {state}[/]"
        + (f": {escape(message)}" if message else "")
    )


def job_body(
    entrypoint: str,
    *,
    where: dict[str, str | None],
    shape: dict[str, Any],
    runtime_env: dict[str, Any],
    deadline: str | None,
) -> dict[str, Any]:
    """The create body of ``POST .../jobs/`` from ``job submit``'s options (None and
    empty values are left out, so that the server's defaults apply)."""
    body: dict[str, Any] = {"entrypoint": entrypoint}
    if where.get("cluster"):
        body["cluster"] = where["cluster"]
    elif where.get("flavor"):
        body.update(flavors_body(str(where["flavor"])))
    else:
        raise CliError(
            "where should it run? give --flavor (GPUs of its own) or --cluster NAME",
            code=exitcodes.USAGE,
        )
    body.update({k: v for k, v in shape.items() if v is not None})
    env = {k: v for k, v in runtime_env.items() if v}
    if "env_vars" in env:
        env["env_vars"] = parse_env(env["env_vars"])
    if env:
        body["runtime_env"] = env
    if deadline:
        try:
            body["active_deadline_seconds"] = durations.parse_seconds(deadline)
        except ValueError as exc:
            raise CliError(str(exc), code=exitcodes.USAGE) from None
    return body


@job_app.command()
def submit(
    ctx: typer.Context,
    entrypoint: Annotated[
        str, typer.Option("--entrypoint", "-c", help='The driver\'s command: "python train.py".')
    ],
    name: Annotated[str | None, typer.Option(help="Name (default: generated).")] = None,
    flavor: Annotated[
        str | None, typer.Option("--flavor", "-f", help="GPU flavor, or several: h100,l4.")
    ] = None,
    workers: Annotated[int | None, typer.Option("--workers", "-w", min=0)] = None,
    kind: Annotated[str | None, typer.Option(help="dev or prod.")] = None,
    cluster: Annotated[
        str | None, typer.Option(help="Run on this ready dev cluster of yours instead.")
    ] = None,
    working_dir: Annotated[
        str | None, typer.Option(help="A remote URI (s3://, gs://, https://...zip).")
    ] = None,
    pip: Annotated[list[str] | None, typer.Option(help="A pip requirement (repeatable).")] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for the driver.")
    ] = None,
    image: Annotated[str | None, typer.Option(help="Ray image.")] = None,
    deadline: Annotated[
        str | None, typer.Option(help="Stop the job after it ran this long (e.g. 2h).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-F", help="Stream its log; exit with its outcome.")
    ] = False,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """Submit a batch job: on GPUs of its own (--flavor) or on a dev cluster (--cluster)."""
    s = session(ctx, output_option, tenant=tenant)
    body = job_body(
        entrypoint,
        where={"cluster": cluster, "flavor": flavor},
        shape={"name": name, "workers": workers, "kind": kind, "image": image},
        runtime_env={"working_dir": working_dir, "pip": pip, "env_vars": env},
        deadline=deadline,
    )
    job = s.client.post(_path(s), body)
    job_name = str(job["name"])
    output.stderr.print(f"Submitted [bold]{escape(job_name)}[/] in {escape(s.tenant())}.")
    if follow:
        try:
            job = follow_job(s, job_name, log_to_stdout=not s.json)
        except KeyboardInterrupt:
            output.stderr.print(
                f"\nStopped following; the job goes on. `gangway job logs {job_name} -f` "
                f"follows it again, `gangway job stop {job_name}` stops it."
            )
            raise typer.Exit(exitcodes.INTERRUPTED) from None
        _ended(job)
    if s.json:
        output.print_json(job)
    elif not follow:
        output.stdout.print(f"{escape(job_name)}: {output.state_text(job.get('state'))}")
        output.stderr.print(f"`gangway job logs {job_name} --follow` follows it.")
    if follow:
        raise typer.Exit(outcome_code(job))


@job_app.command("ls")
def list_jobs(
    ctx: typer.Context, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """Your tenant's jobs."""
    s = session(ctx, output_option, tenant=tenant)
    items = s.client.get_all(_path(s), {"ordering": "-created_at"})

    def show() -> None:
        rows = [
            (
                j["name"],
                output.state_text(j.get("state")),
                output.flavor(j),
                j.get("owner"),
                (j.get("job") or {}).get("entrypoint"),
                output.when(j.get("created_at")),
                j.get("gpu_hours"),
            )
            for j in items
        ]
        columns = ["NAME", "STATE", "FLAVOR", "OWNER", "ENTRYPOINT", "CREATED", "GPU-H"]
        output.stdout.print(output.table(columns, rows))

    output.emit(s.mode, items, show)


@job_app.command("status")
def job_status(
    ctx: typer.Context, name: JobArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """A job's state, run and timeline."""
    from gangway_cli.commands.clusters import show_timeline

    s = session(ctx, output_option, tenant=tenant)
    job = _job(s, name)

    def show() -> None:
        run = job.get("job") or {}
        output.stdout.print(
            output.fields(
                [
                    ("name", job["name"]),
                    ("state", job.get("state")),
                    ("waiting", output.queue_line(job.get("queue"), s.tenant())),
                    ("entrypoint", run.get("entrypoint")),
                    ("cluster", run.get("cluster")),
                    ("ray status", run.get("job_status")),
                    ("message", run.get("message")),
                    ("flavor", output.flavor(job)),
                    ("gpu-hours", job.get("gpu_hours")),
                ]
            )
        )
        show_timeline(job.get("events") or [])

    output.emit(s.mode, job, show)


@job_app.command("logs")
def job_logs(
    ctx: typer.Context,
    name: JobArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Until it ends; exit with its outcome.")
    ] = False,
    tail: Annotated[int, typer.Option(min=1, max=5000, help="Last lines.")] = 200,
    tenant: TenantOpt = None,
    output_option: OutputOpt = None,
) -> None:
    """The driver's output."""
    s = session(ctx, output_option, tenant=tenant)
    if follow and s.json:
        raise CliError("--follow prints text; leave out -o json", code=exitcodes.USAGE)
    if not follow:
        answer = s.client.get(_path(s, name, "logs/"), params={"tail": tail}, what=_what(s, name))
        if s.json:
            output.print_json(answer)
            return
        if not answer.get("text") and answer.get("message"):
            output.stderr.print(escape(str(answer["message"])))
        sys.stdout.write(str(answer.get("text", "")))
        return
    _job(s, name)  # a 404 names the job before following
    try:
        job = follow_job(s, name, log_to_stdout=True)
    except KeyboardInterrupt:
        raise typer.Exit(exitcodes.INTERRUPTED) from None
    _ended(job)
    raise typer.Exit(outcome_code(job))


@job_app.command("stop")
def job_stop(
    ctx: typer.Context, name: JobArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """Stop a job (it ends `stopped`; its GPUs go back)."""
    s = session(ctx, output_option, tenant=tenant)
    job = s.client.post(_path(s, name, "stop/"), what=_what(s, name))
    output.emit(
        s.mode,
        job,
        lambda: output.stdout.print(f"{escape(name)}: {output.state_text(job.get('state'))}"),
    )


@job_app.command("rm")
def job_rm(
    ctx: typer.Context, name: JobArg, tenant: TenantOpt = None, output_option: OutputOpt = None
) -> None:
    """Delete a job (and, if it runs, stop it)."""
    s = session(ctx, output_option, tenant=tenant)
    job = s.client.delete(_path(s, name), what=_what(s, name))
    output.emit(s.mode, job, lambda: output.stdout.print(f"Deleting {escape(name)}."))
