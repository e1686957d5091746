"""PAL's GPU classification: k-means by silhouette, outliers, profile import and its errors."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group
from slurm_plugin.errors import InputError
from slurm_plugin.physics.gpu_profile import classify, import_files
from slurm_plugin.physics.kmeans import best_k, kmeans_1d
from slurm_plugin.physics.variability import load_profile


def _blobs(centres, n, sd, seed=0):
    rnd = random.Random(seed)
    vals, truth = [], []
    for i, c in enumerate(centres):
        for _ in range(n):
            vals.append(rnd.gauss(c, sd))
            truth.append(i)
    return vals, truth


@pytest.mark.parametrize("centres", [(1.0, 2.0), (1.0, 1.5, 3.0), (10.0, 11.0, 12.0, 13.0, 14.0)])
def test_silhouette_finds_the_known_number_of_clusters(centres):
    vals, truth = _blobs(centres, 40, 0.05, seed=len(centres))
    c = best_k(vals)
    assert c.k == len(centres)
    for got, want in zip(sorted(c.centroids), centres):
        assert got == pytest.approx(want, abs=0.05)
    # every known cluster maps to one label
    assert all(len({c.labels[i] for i, t in enumerate(truth) if t == k}) == 1
               for k in range(len(centres)))


def test_kmeans_is_deterministic_and_handles_degenerate_input():
    vals, _ = _blobs((0.0, 5.0), 30, 1.0, seed=9)
    assert kmeans_1d(vals, 3) == kmeans_1d(list(vals), 3)
    assert best_k([1.0] * 5).k == 1
    assert best_k([1.0, 2.0]).k == 2
    assert best_k([1.0, 1.0, 2.0, 2.0]).k == 2
    with pytest.raises(ValueError):
        kmeans_1d([], 2)


def test_silhouette_matches_the_quadratic_definition():
    vals, _ = _blobs((1.0, 1.3, 2.0), 7, 0.08, seed=4)
    c = kmeans_1d(vals, 3)
    total = 0.0
    for i, v in enumerate(vals):
        own = [abs(v - w) for j, w in enumerate(vals) if j != i and c.labels[j] == c.labels[i]]
        if not own:
            continue
        a = sum(own) / len(own)
        b = min(sum(abs(v - w) for j, w in enumerate(vals) if c.labels[j] == k)
                / sum(1 for j in range(len(vals)) if c.labels[j] == k)
                for k in set(c.labels) if k != c.labels[i])
        total += (b - a) / max(a, b)
    assert c.silhouette == pytest.approx(total / len(vals))


def test_classify_keeps_outliers_apart_and_normalises_to_the_median_cluster():
    vals = [1.0] * 30 + [1.2] * 10 + [5.0]
    factors, labels = classify(vals)
    assert labels[-1] == "outlier" and factors[-1] == pytest.approx(5.0)
    assert factors[0] == pytest.approx(1.0) and factors[30] == pytest.approx(1.2)


HEAD = "exp,uuid,cabinet,node,device,perf\n"


def _write(tmp_path, name, rows, head=HEAD):
    p = tmp_path / name
    p.write_text(head + "".join(rows))
    return p


def _gpu_rows(app, times, cab="c001"):
    out = []
    for i, t in enumerate(times):
        node, dev = divmod(i, 4)
        out.append(f"{app},GPU-{node}-{dev},{cab},{node},{dev},{t}\n")
        out.append(f"{app},GPU-{node}-{dev},{cab},{node},{dev},{t * 1.001}\n")
    return out


def test_import_builds_a_profile_the_simulator_and_show_read(tmp_path):
    res = _write(tmp_path, "resnet-x.csv", _gpu_rows("resnet", [100.0] * 12 + [130.0] * 4))
    pr = _write(tmp_path, "pagerank-x.csv", _gpu_rows("pagerank", [50.0] * 8))
    out = tmp_path / "p.csv"
    rows = import_files([res, pr], out)
    assert len(rows) == 16
    slow = [r for r in rows if r.node == "c001-3"]
    assert all(r.factors[0] == pytest.approx(1.3, rel=1e-3) for r in slow)
    # node 2 has no pagerank run: class D counts as median, and shows as unmeasured
    assert all(r.factors[3] == 1.0 and r.clusters[3] == "-" for r in rows if r.node == "c001-2")
    prof = load_profile(out)
    assert prof.by_gpu()[("c001-3", 2)][0] == pytest.approx(1.3, rel=1e-3)
    result = CliRunner().invoke(group, ["profile-gpus", "show", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["classes"]["A"] == {"A0": 12, "A1": 4}
    text = CliRunner().invoke(group, ["profile-gpus", "show", str(out)]).output
    assert "class A:" in text and "c001-3:1" in text


def test_application_from_a_model_column_or_from_any_part_of_the_file_name(tmp_path):
    """Other clusters' files of the same study: Frontera's pagerank file names its application
    in a ``model`` column and its file name starts with the cluster (frontera-pagerank-agg.csv);
    a file without either column is named by the application anywhere in its name."""
    by_model = _write(tmp_path, "frontera-pagerank-agg.csv",
                      [r.replace("pagerank,", "", 1) + "" for r in
                       _gpu_rows("pagerank", [50.0] * 4 + [60.0] * 4)],
                      head="uuid,cabinet,node,device,perf\n")
    rows = import_files([by_model], tmp_path / "p.csv")
    assert [round(r.factors[3], 2) for r in rows] == [1.0] * 4 + [1.2] * 4
    named = _write(tmp_path, "frontera-resnet-agg.csv",
                   ["c1,1,0,GPU-a,pagerank,9\n"], head="cabinet,node,device,uuid,model,perf\n")
    assert import_files([named], tmp_path / "q.csv")[0].perf[3] == 9.0


@pytest.mark.parametrize("head,row,match", [
    ("exp,uuid,node,device\n", "resnet,GPU-1,1,0\n", r"line 1: column time or perf: missing"),
    ("exp,node,device,perf\n", "resnet,1,0,3\n", r"line 1: column uuid: missing"),
    (HEAD, "resnet,GPU-1,c1,1,0,nan\n", r"line 2: column perf: 'nan'"),
    (HEAD, "resnet,GPU-1,c1,1,0,0\n", r"line 2: column perf: '0'"),
    (HEAD, "resnet,GPU-1,c1,1,0,x\n", r"line 2: column perf: 'x' is not a number"),
    (HEAD, "resnet,GPU-1,c1,1,0,3\nresnet,GPU-1,c1,2,0,3\n",
     r"line 3: column uuid: duplicate GPU uuid 'GPU-1'"),
])
def test_bad_measurements_name_file_line_and_column(tmp_path, head, row, match):
    p = _write(tmp_path, "resnet-bad.csv", [row], head=head)
    with pytest.raises(InputError, match=match) as exc:
        import_files([p], tmp_path / "o.csv")
    assert str(p) in str(exc.value)


def test_cli_import_reports_errors_without_a_traceback(tmp_path):
    p = _write(tmp_path, "resnet-bad.csv", ["resnet,GPU-1,c1,1,0,nan\n"])
    r = CliRunner().invoke(group, ["profile-gpus", "import", str(p), "--out",
                                   str(tmp_path / "o.csv")])
    assert r.exit_code != 0
