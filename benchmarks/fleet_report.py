"""The fleet benchmark's markdown section, from the raw figures of its runs
(:func:`benchmarks.fleet.measure`)."""

from __future__ import annotations

import os
import statistics
from typing import Any

from benchmarks import support


def _member_figure(result: dict[str, Any], key: str) -> float:
    """The median over the members of one pass figure."""
    return statistics.median(m[key] for m in result["passes"]["members"].values())


def _per_cluster(result: dict[str, Any], key: str) -> float:
    """A pass's seconds per row of its member, the median over the members that have rows."""
    members = [m for m in result["passes"]["members"].values() if m["rows"]]
    return statistics.median(m[key] / m["rows"] for m in members)


def check(results: list[dict[str, Any]], per_member: int) -> dict[str, Any] | None:
    """A member's full pass at ``per_member`` clusters per member with the fewest and with
    the most members (``None``: not measured)."""
    # 1,000 over 3 members is 333 each, as 3,330 over 10 is.
    sized = {
        r["members"]: r
        for r in results
        if r["clusters"] // r["members"] == per_member and "error" not in r
    }
    if len(sized) < 2:
        return None
    few, many = sized[min(sized)], sized[max(sized)]
    return {
        "few": few["members"],
        "many": many["members"],
        "few_full": _member_figure(few, "full"),
        "many_full": _member_figure(many, "full"),
        "few_steady": _member_figure(few, "steady"),
        "many_steady": _member_figure(many, "steady"),
        "ratio": _member_figure(many, "full") / _member_figure(few, "full"),
        "steady_ratio": _member_figure(many, "steady") / _member_figure(few, "steady"),
    }


def _row(r: dict[str, Any]) -> str:
    if "error" in r:
        return (
            f"| {r['members']} | {r['clusters']:,} | did not finish: {r['error']} "
            f"({r['ready']:,} ready) | | | | | | | |"
        )
    placed = [n for name, n in r["placed"].items() if name != "None"]
    clusters = r["clusters"]
    return (
        f"| {r['members']} | {clusters:,} | {min(placed):,} to {max(placed):,} "
        f"| {clusters / r['created_seconds']:,.0f}/s | {r['ready_seconds']:.1f} s "
        f"(**{clusters / r['ready_seconds']:,.0f} clusters/s**) "
        f"| {r['kube_requests'] / clusters:.1f} "
        f"| {_member_figure(r, 'full') * 1000:,.0f} ms "
        f"({_per_cluster(r, 'full') * 1e6:,.0f} µs) "
        f"| {_member_figure(r, 'steady') * 1000:,.0f} ms "
        f"({_per_cluster(r, 'steady') * 1e6:,.0f} µs) "
        f"| {_member_figure(r, 'full_calls'):.0f} "
        f"| {r['passes']['fleet_steady'] * 1000:,.0f} ms |"
    )


def _load(results: list[dict[str, Any]]) -> str:
    """The load average as each run ended (figures saved without it: as written)."""
    loads = [r["load"] for r in results if "load" in r]
    if len(loads) < len(results):
        return support.load_line()
    return (
        "Load average (1 min, 5 min) as each run ended: "
        + ", ".join(f"{one:.1f}, {five:.1f}" for one, five in loads)
        + f" on {os.cpu_count()} CPUs."
    )


def section(results: list[dict[str, Any]], per_member: int) -> str:
    """The markdown section: what was run, the table, the check."""
    rows = [_row(r) for r in results]
    failures = [f for r in results for f in r.get("failures", [])]
    unready = [r for r in results if r["ready"] < r["clusters"] - len(r.get("failures", []))]
    checked = check(results, per_member)
    if checked is None:
        verdict = "The pass check needs two member counts at equal clusters per member: not run."
    else:
        verdict = (
            f"A member's pass at {per_member:,} clusters per member: full "
            f"{checked['few_full'] * 1000:,.0f} ms with {checked['few']} members, "
            f"{checked['many_full'] * 1000:,.0f} ms with {checked['many']}: "
            f"**{checked['ratio']:.2f}x** for {checked['many'] / checked['few']:.1f}x the "
            f"members and clusters (steady: {checked['few_steady'] * 1000:,.0f} ms, "
            f"{checked['many_steady'] * 1000:,.0f} ms, {checked['steady_ratio']:.2f}x). "
            "A cross-member term would make it grow with the fleet; 1x is none."
        )
    return "\n".join(
        [
            "## Fleet: clusters spread over several kubesim members",
            "",
            "One kubesim process per member, each with the same share of 8 x H100 nodes "
            "(enough for its share of single-GPU workers; the last member's share may be "
            "short) and CPU nodes for the heads; the first member is the settings' own, the "
            "others are registered by address. gunicorn (3 sync workers), a Celery worker "
            "(threads, 2) and beat, PostgreSQL, all on this machine. 8 client threads create "
            "the dev clusters (one single-GPU worker each) through the API for 100 "
            "engineers in 20 tenants; admission places each on the first member in the "
            "admin's order with room, so the first fills and the rest spill over; each "
            "member's reconcile pass runs in a thread of its own. *Ready*: every row "
            "`ready`, from the first create. Kubernetes requests are every member's kubesim's "
            "count over that time (passes, probes and applies), per cluster.",
            "",
            "Then the product is stopped and each member's reconcile pass is timed in the "
            "benchmark's process, one member at a time, listing every kind "
            "(`RECONCILE_WATCH` off): *full* folds every row of the member, *steady* skips "
            "them all (nothing changed); the median over the members, and in brackets per "
            "cluster of the member. *API calls*: a member's full pass's Kubernetes requests. "
            "*Fleet pass*: one steady pass over every member side by side, as the "
            "`reconcile` task runs it.",
            "",
            "| members | clusters | per member | creates | until all ready "
            "| Kubernetes requests per cluster | member's full pass (per cluster) "
            "| member's steady pass (per cluster) | its API calls | fleet pass |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            verdict,
            "",
            f"Failed creates: {len(failures)}"
            + (f" (first: {failures[0][:200]})" if failures else "")
            + f"; runs with clusters not ready: {len(unready)}. {_load(results)}",
        ]
    )
