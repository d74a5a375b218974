"""The batch job kind on the command line: what ``job ls``, ``job status`` and ``job rm``
show of a job (:data:`KIND`), and the commands only a job has: ``job submit``,
``job logs`` and ``job stop``, on ``/api/v1/tenants/{tenant}/jobs/``.

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
from gangway_cli.commands import workloads
from gangway_cli.commands.workloads import CliKind, Column
from gangway_cli.errors import CliError
from gangway_cli.follow import new_lines

POLL_SECONDS = 1.0
# The exit code of a followed job that ended failed or stopped (not an error of the CLI's).
FAILED = 7
ENDED = ("succeeded", "failed", "stopped", "deleting", "deleted")

NAME_HELP = "The job's name (`gangway job ls` lists them)."
JobArg = Annotated[str, typer.Argument(help=NAME_HELP)]


def outcome_code(job: dict[str, Any]) -> int:
    """The exit code of a job that ended: 0 if it succeeded, else 7."""
    return exitcodes.OK if job.get("state") == "succeeded" else FAILED


def follow_job(s: Session, name: str, *, log_to_stdout: bool) -> dict[str, Any]:
    """Print the driver's log as it grows and state changes as they happen, until the
    job ends; returns the ended job. Log lines go to stdout (stderr with -o json)."""
    write = sys.stdout.write if log_to_stdout else sys.stderr.write
    seen: list[str] = []
    state = ""
    while True:
        job = workloads.get_item(s, KIND, name)
        if job.get("state") != state:
            state = str(job.get("state"))
            note = job.get("queue") and output.queue_line(job["queue"], s.tenant())
            output.stderr.print(
                f"{escape(name)}: {output.state_text(state)}"
                + (f" - {escape(note)}" if note else "")
            )
        log = s.client.get(workloads.item_path(s, KIND, name, "logs/"), params={"tail": 1000})
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
        body.update(workloads.flavors_body(str(where["flavor"])))
        body.update(
            workloads.placement_body(
                where.get("kube_cluster"),
                where.get("region"),
                where.get("topology"),
                where.get("topology_mode"),
            )
        )
    else:
        raise CliError(
            "where should it run? give --flavor (GPUs of its own) or --cluster NAME",
            code=exitcodes.USAGE,
        )
    body.update({k: v for k, v in shape.items() if v is not None})
    env = {k: v for k, v in runtime_env.items() if v}
    if "env_vars" in env:
        env["env_vars"] = workloads.parse_env(env["env_vars"])
    if env:
        body["runtime_env"] = env
    if deadline:
        try:
            body["active_deadline_seconds"] = durations.parse_seconds(deadline)
        except ValueError as exc:
            raise CliError(str(exc), code=exitcodes.USAGE) from None
    return body


def _status_fields(job: dict[str, Any], tenant: str) -> list[tuple[str, Any]]:
    run = job.get("job") or {}
    return [
        *workloads.standing(job, tenant),
        ("entrypoint", run.get("entrypoint")),
        ("cluster", run.get("cluster")),
        ("ray status", run.get("job_status")),
        ("message", run.get("message")),
        ("flavor", output.flavor(job)),
        ("priority class", job.get("priority_class")),
        ("kube cluster", output.placement(job)),
        ("topology", output.topology(job)),
        ("gpu-hours", job.get("gpu_hours")),
    ]


KIND = CliKind(
    noun="job",
    name_help=NAME_HELP,
    collection="jobs",
    app=job_app,
    delete_command="rm",
    helps={
        "ls": "Your tenant's jobs.",
        "status": "A job's state, run and timeline.",
        "delete": "Delete a job (and, if it runs, stop it).",
    },
    columns=(
        workloads.NAME,
        workloads.STATE,
        workloads.FLAVOR,
        workloads.OWNER,
        Column("ENTRYPOINT", lambda j: (j.get("job") or {}).get("entrypoint")),
        workloads.CREATED,
        Column("GPU-H", lambda j: j.get("gpu_hours")),
    ),
    status_fields=_status_fields,
    list_filters=False,
    delete_waits=False,
    exit_codes=((FAILED, "a followed job ended failed or stopped"),),
)


def submit(
    s: Session,
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
    kube_cluster: workloads.KubeClusterOpt = None,
    region: workloads.RegionOpt = None,
    topology: workloads.TopologyOpt = None,
    topology_mode: workloads.TopologyModeOpt = None,
    priority_class: workloads.PriorityClassOpt = None,
) -> workloads.Creation:
    """Submit a batch job: on GPUs of its own (--flavor) or on a dev cluster (--cluster)."""
    body = job_body(
        entrypoint,
        where={
            "cluster": cluster,
            "flavor": flavor,
            "kube_cluster": kube_cluster,
            "region": region,
            "topology": topology,
            "topology_mode": topology_mode,
        },
        shape={
            "name": name,
            "workers": workers,
            "kind": kind,
            "image": image,
            "priority_class": priority_class,
        },
        runtime_env={"working_dir": working_dir, "pip": pip, "env_vars": env},
        deadline=deadline,
    )
    return workloads.Creation(body, then=lambda job: _submitted(s, job, follow=follow))


def _submitted(s: Session, job: dict[str, Any], *, follow: bool) -> None:
    job_name = str(job["name"])
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


workloads.register_create(KIND, "submit", submit)
workloads.register(KIND)


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
    workloads.no_json_follow(s, follow)
    if not follow:
        answer = workloads.read_log(s, KIND, name, {"tail": tail})
        if answer is not None:
            sys.stdout.write(str(answer.get("text", "")))
        return
    workloads.get_item(s, KIND, name)  # a 404 names the job before following
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
    job = s.client.post(
        workloads.item_path(s, KIND, name, "stop/"), what=workloads.what(s, KIND, name)
    )
    output.emit(
        s.mode,
        job,
        lambda: output.stdout.print(f"{escape(name)}: {output.state_text(job.get('state'))}"),
    )
