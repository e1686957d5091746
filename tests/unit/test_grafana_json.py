"""contrib/grafana/wattbatch.json is a dashboard Grafana can import: the structure the
real-cluster test (tests/cluster/test_grafana_dashboard.py) does not look at."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "wattbatch.json"


def test_dashboard_structure():
    d = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in d["templating"]["list"]}
    assert variables == {"datasource", "node", "zone", "account"}
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for y in range(g["y"], g["y"] + g["h"]):       # no two panels overlap
            for x in range(g["x"], g["x"] + g["w"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["rawQuery"] is True and t["datasource"]["uid"] == "${datasource}"
            assert "$timeFilter" in t["query"], f"{p['title']}: no $timeFilter: {t['query']}"
            used = set(re.findall(r"\$(\w+)", t["query"])) - {"timeFilter", "__interval"}
            assert used <= variables, f"{p['title']}: unknown variable(s) {used - variables}"
            if "GROUP BY time(" in t["query"]:
                assert "$__interval" in t["query"], p["title"]
