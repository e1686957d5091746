"""Every InfluxQL query of contrib/grafana/wattbatch.json, with Grafana's macros and template
variables substituted as Grafana does, runs against the local cluster's real InfluxDB holding
data this test wrote (tests/cluster/energy_data.py), and returns the series its panel shows.

A panel without an expectation here fails the test: a new panel must say what it returns.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from energy_data import ACCOUNTS, NODES, ZONE, build
from slurm_plugin.telemetry.influx import Series

DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "wattbatch.json"


@pytest.fixture(scope="module")
def influx(localcluster):
    client = localcluster.influx(f"wb_test_dash_{uuid.uuid4().hex[:8]}")
    client.create_database()
    data = build(time.time())
    client.write(data.points)
    yield client, data
    client.drop_database()


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def render(query: str, from_s: float, to_s: float, interval: str,
           variables: dict[str, list[str] | None]) -> str:
    """Grafana's InfluxDB datasource: $timeFilter as epoch milliseconds, $__interval as given,
    a variable inside /regex/ as its allValue (.*) for All, the escaped value, or (a|b)."""
    q = query.replace("$timeFilter", f"time >= {int(from_s * 1000)}ms and time <= "
                                     f"{int(to_s * 1000)}ms")
    q = q.replace("$__interval", interval)
    for name, values in variables.items():
        text = ".*" if values is None else (
            re.escape(values[0]) if len(values) == 1 else
            "(" + "|".join(re.escape(v) for v in values) + ")")
        q = q.replace("${" + name + "}", text).replace("$" + name, text)
    assert not re.search(r"\$[{\w]", q), f"unsubstituted macro or variable in {q}"
    return q


def tagset(series: list[Series], *keys: str) -> set[tuple[str, ...]]:
    return {tuple(s.tags.get(k, "") for k in keys) for s in series}


def values(s: Series, column: int = 1) -> list[float]:
    return [row[column] for row in s.values if row[column] is not None]


# --- what each panel must show, given the data -------------------------------------------------

def _cluster_power(series, data, sel):
    assert len(series) == 1 and not series[0].tags
    nodes = sel["node"] or list(NODES)
    per_gpu = [40.0 + 2.0 * ((NODES.index(n) * 4 + g) * 5 + k % 3)
               for n in nodes for g in range(4) for k in (0, 1, 2)]
    got = values(series[0])
    assert got, "no power in any interval"
    # each hourly bucket is the sum over GPUs of their mean power over the hour
    assert min(per_gpu) * 4 * len(nodes) <= max(got) <= max(per_gpu) * 4 * len(nodes)


def _per_gpu(series, data, sel):
    want = {(n, str(g)) for n in (sel["node"] or NODES) for g in range(4)}
    assert tagset(series, "node", "gpu") == want
    assert all(values(s) for s in series)


def _intensity(series, data, sel):
    assert tagset(series, "zone") == {(ZONE,)}
    assert 80 <= min(values(series[0])) and max(values(series[0])) <= 320


def _records(data, sel):
    accounts = sel["account"] or list(ACCOUNTS)
    return [r for rs in data.jobs.values() for r in rs if r["account"] in accounts]


def _by_account(field, scale):
    def check(series, data, sel):
        want = Counter()
        for r in _records(data, sel):
            if field in r:
                want[r["account"]] += r[field] / scale
        assert tagset(series, "account") == {(a,) for a in want}
        for s in series:
            assert sum(values(s)) == pytest.approx(want[s.tags["account"]], rel=1e-9)
    return check


def _job_table(series, data, sel):
    recs = _records(data, sel)
    rows = [{**s.tags, **row} for s in series for row in s.rows()]   # Grafana: tags as columns
    assert {r["job_id"] for r in rows} == {r["job_id"] for r in recs}
    assert {"energy_kwh", "co2_kg", "gpu_hours", "shared_pct", "user", "account"} <= set(rows[0])
    for row in rows:
        mine = [r for r in recs if r["job_id"] == row["job_id"]]
        assert row["energy_kwh"] == pytest.approx(sum(r["energy_j"] for r in mine) / 3.6e6)
        assert row["shared_pct"] == pytest.approx(100.0 if mine[0]["shared_gpu_s"] else 0.0)


def _shared_share(series, data, sel):
    assert len(series) == 1
    got = values(series[0])
    assert got and all(0.0 <= v <= 100.0 for v in got) and max(got) > 0


def _split(series, data, sel, query):
    m = re.search(r""""split" (?:= '([\w-]+)'|=~ /(.+?)/)""", query)
    match = (lambda v: v == m.group(1)) if m.group(1) else \
        (lambda v: re.search(m.group(2), v) is not None)
    want = sum(1 for r in _records(data, sel) if match(r["split"]))
    assert want, f"the test data has no record for {query}"
    assert len(series) == 1 and values(series[0]) == [want]


def _progress(series, data, sel):
    assert tagset(series, "job_id") == {("201",), ("202",)}
    assert all(values(s) for s in series)


def _actions(series, data, sel):
    want = Counter((a["kind"], a["status"]) for a in data.actions)
    assert {(s.tags["kind"], s.tags["status"]): sum(values(s)) for s in series} == dict(want)


def _action_table(series, data, sel):
    rows = series[0].rows()
    newest_first = sorted(data.actions, key=lambda a: -a["time"])
    assert [r["job_id"] for r in rows] == [a["job_id"] for a in newest_first]
    assert {"kind", "status", "policy", "why", "detail", "gpus"} <= set(rows[0])


EXPECT = {
    "Cluster GPU power": _cluster_power,
    "GPU power": _per_gpu,
    "GPU utilization": _per_gpu,
    "Grid carbon intensity": _intensity,
    "GPU energy of finished jobs by account": _by_account("energy_j", 3.6e6),
    "Carbon of finished jobs by account": _by_account("co2_g", 1000.0),
    "Per-job GPU energy and carbon (finished jobs)": _job_table,
    "Shared share of GPU time": _shared_share,
    "Jobs by energy split": _split,
    "Job progress (steps)": _progress,
    "Job throughput": _progress,
    "Reconcile actions": _actions,
    "Recent reconcile actions": _action_table,
}
SELECTIONS = {"all": {"node": None, "zone": None, "account": None},
              "one each": {"node": ["gpu2"], "zone": [ZONE], "account": ["bio"]},
              "two each": {"node": ["gpu1", "gpu3"], "zone": [ZONE], "account": ["cs", "physics"]}}


def test_every_panel_has_an_expectation():
    titles = [p["title"] for p in dashboard()["panels"]]
    assert len(titles) == len(set(titles)), "two panels share a title"
    assert set(titles) == set(EXPECT)
    covered = {"cluster power": "Cluster GPU power", "per-job energy and carbon":
               "Per-job GPU energy and carbon (finished jobs)", "sharing":
               "Shared share of GPU time", "carbon intensity": "Grid carbon intensity",
               "reconcile actions": "Reconcile actions"}
    assert set(covered.values()) <= set(titles)


@pytest.mark.parametrize("selection", SELECTIONS)
def test_panel_queries_return_their_series(influx, selection):
    client, data = influx
    sel = SELECTIONS[selection]
    from_s, to_s = data.end_s - 3 * 86400 - 3600, data.end_s + 3600
    for panel in dashboard()["panels"]:
        for target in panel["targets"]:
            q = render(target["query"], from_s, to_s, "1h", sel)
            series = client.query(q)
            assert series, f"panel {panel['title']!r}: no series from {q}"
            check = EXPECT[panel["title"]]
            check(*(series, data, sel, q)[:check.__code__.co_argcount])


def test_template_variable_queries(influx):
    client, data = influx
    want = {"node": set(NODES), "zone": {ZONE}, "account": set(ACCOUNTS)}
    for var in dashboard()["templating"]["list"]:
        if var["type"] != "query":
            continue
        series = client.query(var["query"])
        assert {row[1] for s in series for row in s.values} == want[var["name"]], var["name"]


def test_the_default_six_hours_show_the_recent_data(influx):
    """Grafana opens the dashboard on now-6h with a $__interval of about 20 s."""
    client, data = influx
    sel = SELECTIONS["all"]
    for title in ("Cluster GPU power", "GPU power", "Job progress (steps)", "Reconcile actions",
                  "Recent reconcile actions", "Grid carbon intensity"):
        panel = next(p for p in dashboard()["panels"] if p["title"] == title)
        q = render(panel["targets"][0]["query"], data.end_s - 6 * 3600, data.end_s + 60, "20s",
                   sel)
        assert client.query(q), f"panel {title!r}: nothing in the last 6 hours: {q}"
