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
    ("exp,node,dev_id,perf\n", "resnet,1,0,3\n", r"line 1: column uuid: missing"),
    (HEAD, "resnet,,c1,1,-1,3\n", r"line 2: column uuid: empty, and no node and device name "
                                  r"the GPU; give the run its GPU's uuid"),
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


def _import(tmp_path, files, out="o.csv"):
    return CliRunner().invoke(group, ["profile-gpus", "import", *map(str, files), "--out",
                                      str(tmp_path / out)])


def test_application_names_match_in_any_case_and_by_family(tmp_path):
    """ResNet50 is resnet (class A): a name starting with a known application counts as it."""
    times = [100.0] * 12 + [130.0] * 4
    plain = import_files([_write(tmp_path, "a.csv", _gpu_rows("resnet", times))],
                         tmp_path / "a-p.csv")
    for name in ("ResNet50", "RESNET", "resnet-101"):
        got = import_files([_write(tmp_path, f"{name}.csv", _gpu_rows(name, times))],
                           tmp_path / f"{name}-p.csv")
        assert [r.factors for r in got] == [r.factors for r in plain], name
    # the file name's parts follow the same rule
    by_file = _write(tmp_path, "ResNet50-longhorn-agg.csv",
                     [r.split(",", 1)[1] for r in _gpu_rows("x", times)],
                     head="uuid,cabinet,node,device,perf\n")
    assert [r.factors for r in import_files([by_file], tmp_path / "f.csv")] == \
        [r.factors for r in plain]


def test_runs_of_unknown_applications_are_counted_and_reported(tmp_path):
    res = _write(tmp_path, "runs.csv", _gpu_rows("resnet", [100.0] * 8)
                 + _gpu_rows("vgg16", [50.0] * 3) + _gpu_rows("sgemm", [9.0]))
    ignored: dict[str, int] = {}
    rows = import_files([res], tmp_path / "p.csv", ignored)
    assert len(rows) == 8 and ignored == {"vgg16": 6, "sgemm": 2}
    r = _import(tmp_path, [res])
    assert r.exit_code == 0, r.output
    assert "warning: profile-gpus: 6 runs of 'vgg16' ignored: not a profiled application" \
        in r.stderr
    assert "warning: profile-gpus: 2 runs of 'sgemm' ignored" in r.stderr
    assert "8 GPUs from 1 files" in r.stdout
    assert "8 runs of other applications ignored (sgemm, vgg16)" in r.stdout
    # known applications only: nothing said
    clean = _import(tmp_path, [_write(tmp_path, "c.csv", _gpu_rows("resnet", [1.0] * 4))])
    assert clean.exit_code == 0 and "ignored" not in clean.output


def test_no_known_application_lists_the_names_found(tmp_path):
    p = _write(tmp_path, "v.csv", _gpu_rows("VGG16", [50.0] * 3) + _gpu_rows("alexnet", [5.0]))
    with pytest.raises(InputError, match=r"no run of a profiled application .* they hold "
                                         r"'alexnet' \(2 runs\), 'vgg16' \(6 runs\)"):
        import_files([p], tmp_path / "o.csv")


def test_a_byte_order_mark_does_not_hide_the_first_column(tmp_path):
    """As Excel writes it: the first column (exp, or uuid) is still found."""
    rows = _gpu_rows("resnet", [100.0] * 12 + [130.0] * 4)
    want = [r.factors for r in import_files([_write(tmp_path, "a.csv", rows)],
                                            tmp_path / "a-p.csv")]
    bom = tmp_path / "bom.csv"
    bom.write_text(HEAD + "".join(rows), encoding="utf-8-sig")
    assert [r.factors for r in import_files([bom], tmp_path / "b-p.csv")] == want
    first = tmp_path / "uuid-first.csv"
    first.write_text("uuid,exp,cabinet,node,device,perf\n" + "".join(
        ",".join([r.split(",")[1], r.split(",")[0], *r.split(",")[2:]]) for r in rows),
        encoding="utf-8-sig")
    assert [r.factors for r in import_files([first], tmp_path / "c-p.csv")] == want


def test_runs_without_a_uuid_are_named_by_node_and_device(tmp_path):
    rows = _gpu_rows("resnet", [100.0] * 12 + [130.0] * 4)
    full = import_files([_write(tmp_path, "a.csv", rows)], tmp_path / "a-p.csv")
    # no uuid column: node and device name each GPU
    nouuid = _write(tmp_path, "n.csv", [",".join(r.split(",")[:1] + r.split(",")[2:])
                                        for r in rows], head="exp,cabinet,node,device,perf\n")
    got = import_files([nouuid], tmp_path / "n-p.csv")
    assert [(r.node, r.gpu_index, r.factors) for r in got] == \
        [(r.node, r.gpu_index, r.factors) for r in full]
    assert all(r.uuid == "" for r in got)
    # one empty uuid: the run joins its GPU, which keeps the uuid its other runs give
    rows[5] = rows[5].replace("GPU-2-2,", ",")
    got = import_files([_write(tmp_path, "e.csv", rows)], tmp_path / "e-p.csv")
    assert [(r.uuid, r.factors) for r in got] == [(r.uuid, r.factors) for r in full]


def test_an_implausible_factor_is_refused_naming_the_gpu(tmp_path):
    p = _write(tmp_path, "r.csv", _gpu_rows("resnet", [100.0] * 30 + [1500.0]))
    with pytest.raises(InputError, match=r"profile-gpus: GPU c001-7 device 2 \(uuid 'GPU-7-2'\): "
                                         r"class A: its runs take 15x the median GPU's time, "
                                         r"outside 0.1-10"):
        import_files([p], tmp_path / "o.csv")


@pytest.mark.parametrize("value", ["nan", "inf", "1e6"])
def test_show_refuses_a_non_finite_or_implausible_factor(tmp_path, value):
    """Before: show --json printed NaN / Infinity, which no strict JSON parser reads."""
    p = tmp_path / "prof.csv"
    p.write_text("node,gpu_index,uuid,PerfVar_classA,PerfVar_classB,PerfVar_classC,"
                 f"PerfVar_classD\nn0,0,u0,1,1,1,1\nn0,1,u1,{value},1,1,1\n")
    for extra in ([], ["--json"]):
        r = CliRunner().invoke(group, ["profile-gpus", "show", str(p), *extra])
        assert r.exit_code != 0 and "Infinity" not in r.output and "NaN" not in r.output
        assert isinstance(r.exception, InputError)
        assert f"{p}: line 3: column PerfVar_classA: " in str(r.exception)
        assert value in str(r.exception)


def test_show_reads_a_profile_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "prof.csv"
    p.write_text("PerfVar_classA,PerfVar_classB,PerfVar_classC,PerfVar_classD,node,gpu_index\n"
                 "1.2,1,1,1,n0,0\n", encoding="utf-8-sig")
    r = CliRunner().invoke(group, ["profile-gpus", "show", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["gpus"][0]["factors"]["A"] == 1.2
