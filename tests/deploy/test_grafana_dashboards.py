"""deploy/grafana/: the Grafana dashboards load, their PromQL parses, and they ask only for
series gangway exports (or the DCGM exporter's, marked as such).

No Grafana runs here (none is packaged for this machine), so each dashboard is checked
against ``grafana_dashboard.schema.json`` (a minimal JSON Schema of the classic dashboard
model, written from Grafana's "Dashboard JSON model" documentation), every query is
parsed by the real ``promtool`` (Debian's ``prometheus`` package) as a recording rule,
and every metric and label a query names is looked up in ``controlplane.metrics``'s
registry. The component that ships them renders a ConfigMap for Grafana's sidecar.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

from clusters.kube import dcgm
from controlplane import metrics
from tests.deploy.test_kustomize import TARGETS, of_kind, render

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana"
NAMES = ("fleet", "tenant", "engine")
SCHEMA = Path(__file__).with_name("grafana_dashboard.schema.json")
# The sidecar of the Grafana Helm chart loads ConfigMaps carrying this label.
SIDECAR_LABEL = ("grafana_dashboard", "1")
# Series that gangway does not export but Prometheus scrapes from NVIDIA's DCGM exporter
# (docs/gpu-utilization.md), with the labels the exporter gives them (GPU identity, and
# the holding pod's with its Kubernetes mapping).
DCGM_LABELS = frozenset(
    {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
    | {"namespace", "pod", "container"}
)
EXTERNAL = {dcgm.UTIL: DCGM_LABELS, dcgm.FB_USED: DCGM_LABELS}
# Grafana's own variables, with a value of the kind they expand to.
BUILTIN_VARIABLES = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
# `kubectl apply` (client-side) keeps the whole object in an annotation of at most 256 KiB.
APPLY_ANNOTATION_LIMIT = 262_144


def load(name: str) -> dict[str, Any]:
    """One dashboard's JSON."""
    data: dict[str, Any] = json.loads((DASHBOARDS / f"{name}.json").read_text())
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those folded into a collapsed row included."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The dashboard's template variables by name."""
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"]


def interpolate(expr: str, dashboard: dict[str, Any]) -> str:
    """``expr`` with each ``$var``/``${var}``/``${var:format}`` replaced by a value as Grafana
    would (a textbox's default; ``x`` for the rest), so that promtool can parse it.
    Raises ValueError for a variable the dashboard does not define."""
    defined = variables(dashboard)

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in BUILTIN_VARIABLES:
            return BUILTIN_VARIABLES[name]
        if name not in defined:
            raise ValueError(f"${name} is not a variable of the dashboard")
        variable = defined[name]
        return str(variable["query"]) if variable["type"] == "textbox" else "x"

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


# --- PromQL references -------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    |(?P<range>\[[^\]]*\])
    |(?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])*)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^=<>(){},@])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"bool", "and", "or", "unless", "offset", "inf", "nan", "atan2"}
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_MATCH_OPS = {"=", "!=", "=~", "!~"}


def references(expr: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """The vector selectors of a PromQL expression, as (metric name, label names matched),
    and the label names of its ``by``/``without``/``on``/``ignoring``/``group_*`` clauses.
    A lexer, not a parser: promtool says whether the expression is valid."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        found = _TOKEN.match(expr, position)
        if found is None:
            raise ValueError(f"cannot read {expr[position:]!r}")
        position = found.end()
        if found.lastgroup != "space":
            tokens.append((str(found.lastgroup), found.group()))
    selectors: list[tuple[str, set[str]]] = []
    grouping: set[str] = set()

    def matchers(start: int) -> tuple[set[str], int]:
        """Label names of the ``{...}`` opening at ``start``, and the index after it."""
        names, i = set(), start + 1
        while i < len(tokens) and tokens[i] != ("op", "}"):
            if tokens[i][0] == "ident" and i + 1 < len(tokens) and tokens[i + 1][1] in _MATCH_OPS:
                names.add(tokens[i][1])
            i += 1
        return names, i + 1

    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        if kind == "ident" and text in _GROUPING:
            i += 1
            if after == ("op", "("):
                while i < len(tokens) and tokens[i] != ("op", ")"):
                    if tokens[i][0] == "ident":
                        grouping.add(tokens[i][1])
                    i += 1
            continue
        # A function or aggregation is followed by "(", or by its `by`/`without` clause.
        called = after == ("op", "(") or after in (("ident", "by"), ("ident", "without"))
        if kind == "ident" and text not in _KEYWORDS and not called:
            labels: set[str] = set()
            i += 1
            if after == ("op", "{"):
                labels, i = matchers(i)
            selectors.append((text, labels))
            continue
        if (kind, text) == ("op", "{"):
            labels, i = matchers(i)
            selectors.append(("", labels))  # a selector without a metric name
            continue
        i += 1
    return selectors, grouping


def exported_series() -> dict[str, frozenset[str]]:
    """Every series name a scrape of gangway can show, with its label names: the families
    of ``controlplane.metrics.REGISTRY`` (counters as ``_total``, histograms as ``_bucket``
    with ``le``, ``_sum`` and ``_count``) and the database gauges computed at scrape."""
    labels_of: dict[str, frozenset[str]] = {}
    families: list[Metric] = []
    for obj in vars(metrics).values():
        if isinstance(obj, metrics.ScrapeGauge):
            labels_of[obj.name] = frozenset(obj.labelnames)
            families.append(obj.family())
        elif isinstance(obj, MetricWrapperBase):
            labels_of[obj._name] = frozenset(obj._labelnames)
    families += list(metrics.REGISTRY.collect())
    series: dict[str, frozenset[str]] = {}
    for family in families:
        labels = labels_of[family.name]
        if family.type == "counter":
            series[f"{family.name}_total"] = labels
        elif family.type == "histogram":
            series[f"{family.name}_bucket"] = labels | {"le"}
            series[f"{family.name}_sum"] = labels
            series[f"{family.name}_count"] = labels
        elif family.type == "gauge":
            series[family.name] = labels
        else:
            raise AssertionError(f"{family.name}: a {family.type} is not mapped to its series")
    return series


def problems(expr: str, exported: dict[str, frozenset[str]]) -> list[str]:
    """What in ``expr`` is not a series gangway exports (or DCGM's) with its real labels:
    an unknown metric, a label the metric does not have, a grouping label none of the
    expression's metrics has."""
    known = {**exported, **EXTERNAL}
    selectors, grouping = references(expr)
    found: list[str] = []
    available: set[str] = set()
    for metric, labels in selectors:
        if metric not in known:
            found.append(f"{metric or '{...}'} is not a series gangway exports")
            continue
        available |= known[metric]
        for label in sorted(labels - known[metric]):
            found.append(f"{metric} has no label {label}")
    found += [f"no metric of the query has label {label}" for label in sorted(grouping - available)]
    if not selectors:
        found.append("the query reads no series")
    return found


def promtool() -> str:
    """The path of promtool, or the test fails saying how to install it."""
    found = shutil.which("promtool")
    if not found:
        pytest.fail("promtool is missing: apt-get install -y prometheus (it ships promtool)")
    return found


def promtool_errors(rules: dict[str, str], directory: Path) -> str:
    """promtool's complaint about ``rules`` (record name -> PromQL) as recording rules,
    or "" when it parses every expression."""
    path = directory / "dashboard-rules.yml"
    group = {"name": "dashboards", "rules": [{"record": r, "expr": e} for r, e in rules.items()]}
    path.write_text(yaml.safe_dump({"groups": [group]}))
    result = subprocess.run(
        [promtool(), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


# --- (a) the dashboard model -------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_each_dashboard_validates_against_the_dashboard_schema(name: str) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    dashboard = load(name)
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(dashboard), key=lambda e: e.path
    )
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    # The grid is 24 columns wide; overlapping panels are pushed about by Grafana.
    taken: set[tuple[int, int]] = set()
    for panel in panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, f"panel {panel['id']} runs off the grid"
        cells = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & taken, f"panel {panel['id']} overlaps another"
        taken |= cells


def test_the_schema_rejects_what_grafana_would_not_load() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    good = load("engine")
    assert validator.is_valid(good)
    no_uid = {k: v for k, v in good.items() if k != "uid"}
    too_wide = json.loads(json.dumps(good))
    too_wide["panels"][1]["gridPos"]["w"] = 25
    no_expr = json.loads(json.dumps(good))
    del no_expr["panels"][1]["targets"][0]["expr"]
    for bad in (no_uid, too_wide, no_expr):
        assert not validator.is_valid(bad)


# --- (e) identity ------------------------------------------------------------------------


def test_uids_are_unique_and_panel_ids_unique_within_each_dashboard() -> None:
    uids = [load(name)["uid"] for name in NAMES]
    assert len(set(uids)) == len(uids), uids
    for name in NAMES:
        ids = [panel["id"] for panel in panels(load(name))]
        assert len(set(ids)) == len(ids), f"{name}: panel ids repeat"
        for panel in panels(load(name)):
            refs = [t["refId"] for t in panel.get("targets", [])]
            assert len(set(refs)) == len(refs), f"{name} panel {panel['id']}: refIds repeat"


# --- (b) PromQL parses -------------------------------------------------------------------


def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    rules, where = {}, {}
    for name in NAMES:
        dashboard = load(name)
        for n, (place, expr) in enumerate(queries(dashboard)):
            record = f"gangway_dashboard:{name}:q{n}"
            rules[record] = interpolate(expr, dashboard)
            where[record] = f"{name} {place}"
    assert len(rules) > 40
    errors = promtool_errors(rules, tmp_path)
    named = [f"{where[r]}: {e}" for r, e in rules.items() if f'"{r}"' in errors]
    assert not errors, errors + "\n" + "\n".join(named)


def test_promtool_rejects_a_query_that_does_not_parse(tmp_path: Path) -> None:
    assert promtool_errors({"ok:q": "sum(rate(gangway_admitted_total[5m]))"}, tmp_path) == ""
    assert "parse" in promtool_errors({"bad:q": "sum(rate(gangway_admitted_total[5m])"}, tmp_path)
    # An uninterpolated Grafana variable is not PromQL.
    assert promtool_errors({"var:q": "rate(gangway_admitted_total[$__rate_interval])"}, tmp_path)


def test_every_variable_a_query_uses_is_defined() -> None:
    for name in NAMES:
        dashboard = load(name)
        for place, expr in queries(dashboard):
            try:
                interpolate(expr, dashboard)
            except ValueError as exc:
                pytest.fail(f"{name} {place}: {exc}")
    with pytest.raises(ValueError, match=r"\$team"):
        interpolate('gangway_clusters{tenant=~"$team"}', load("tenant"))


# --- (c) only series gangway exports -----------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_query_names_only_series_gangway_exports(name: str) -> None:
    exported = exported_series()
    dashboard = load(name)
    found = [
        f"{place}: {problem}"
        for place, expr in queries(dashboard)
        for problem in problems(expr, exported)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", NAMES)
def test_variable_queries_name_exported_series_and_labels(name: str) -> None:
    exported = exported_series()
    for variable in variables(load(name)).values():
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else ""
        found = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
        assert found, f"{variable['name']}: {query!r} is not label_values(metric, label)"
        metric, label = found.groups()
        assert label in exported[metric], f"{variable['name']}: {metric} has no {label}"
        assert variable["definition"] == query


def test_the_checker_catches_wrong_names_and_labels() -> None:
    exported = exported_series()
    assert problems("sum by (tenant) (gangway_gpus_held)", exported) == []
    assert problems('avg by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace=~"gw-.+"})', exported) == []
    quantile = (
        "histogram_quantile(0.9, sum by (le, flavor) (rate(gangway_wait_seconds_bucket[5m])))"
    )
    assert problems(quantile, exported) == []
    assert problems("sum(gangway_gpus_hold)", exported) == [
        "gangway_gpus_hold is not a series gangway exports"
    ]
    # Suffixes belong to their type: a gauge has no _total, a counter no _bucket.
    assert problems("rate(gangway_gpus_held_total[5m])", exported)
    assert problems("rate(gangway_admitted_total_bucket[5m])", exported)
    assert problems("gangway_admitted", exported)  # the counter's series end in _total
    # Real names with labels they do not have.
    assert problems('gangway_wait_seconds_count{tenant="acme"}', exported) == [
        "gangway_wait_seconds_count has no label tenant"
    ]
    assert problems("sum by (tenant) (rate(gangway_wait_seconds_count[5m]))", exported) == [
        "no metric of the query has label tenant"
    ]
    assert problems('{__name__="gangway_clusters"}', exported)
    assert problems("DCGM_FI_DEV_POWER_USAGE", exported)


def test_the_registry_read_is_every_documented_series() -> None:
    documented = set(
        re.findall(r"^\| `(gangway_\w+)` \|", (ROOT / "docs" / "metrics.md").read_text(), re.M)
    )
    exported = exported_series()
    histograms = {n.removesuffix("_bucket") for n in exported if n.endswith("_bucket")}
    families = {n for n in exported if not n.endswith(("_bucket", "_sum", "_count"))}
    assert families | histograms == documented


# --- conventions -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_panels_query_the_chosen_prometheus(name: str) -> None:
    dashboard = load(name)
    source = variables(dashboard)["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    chosen = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == chosen, panel["id"]
        for target in panel["targets"]:
            assert target["datasource"] == chosen, panel["id"]
    for variable in variables(dashboard).values():
        if variable["type"] == "query":
            assert variable["datasource"] == chosen


def test_the_tenant_dashboard_filters_by_tenant() -> None:
    dashboard = load("tenant")
    tenant = variables(dashboard)["tenant"]
    assert tenant["type"] == "query"
    assert tenant["query"]["query"].startswith("label_values(")
    for place, expr in queries(dashboard):
        assert "$tenant" in expr, f"{place} does not follow the tenant picked"


@pytest.mark.parametrize("name", NAMES)
def test_dcgm_panels_say_the_series_come_from_the_dcgm_exporter(name: str) -> None:
    for panel in panels(load(name)):
        exprs = " ".join(t["expr"] for t in panel.get("targets", []))
        if "DCGM_" in exprs:
            assert "DCGM exporter" in panel["title"], panel["title"]
            assert "not from gangway" in panel["description"] or (
                "gangway does not export" in panel["description"]
            ), panel["title"]


# --- (d) shipped by the kustomize component ----------------------------------------------


def dashboard_maps(target: str) -> list[dict[str, Any]]:
    """The rendered ConfigMaps that Grafana's sidecar would load."""
    key, value = SIDECAR_LABEL
    return [
        m
        for m in of_kind(render(target), "ConfigMap")
        if m["metadata"].get("labels", {}).get(key) == value
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_the_component_ships_the_dashboards_for_the_sidecar(target: str) -> None:
    maps = dashboard_maps(target)
    if target in ("base", "overlays/dev"):
        assert maps == [], "only overlays that include components/grafana ship dashboards"
        return
    (dashboards,) = maps
    # No hash suffix: the sidecar finds it by label, and a renamed copy would linger.
    assert dashboards["metadata"]["name"] == "gangway-grafana-dashboards"
    assert dashboards["metadata"]["namespace"] == "gangway-system"
    data = dashboards["data"]
    assert set(data) == {f"{name}.json" for name in NAMES}
    for name in NAMES:
        assert data[f"{name}.json"] == (DASHBOARDS / f"{name}.json").read_text()
    assert len(yaml.safe_dump(dashboards)) < APPLY_ANNOTATION_LIMIT
