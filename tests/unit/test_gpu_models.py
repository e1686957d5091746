"""The GPU model catalogue (physics/gpu_models.py, data/gpu_models.json): names as NVML reports
them and aliases, the close-names error, every constant with its source, the V100 entry equal
to physics.json's, the curves' shape, ``wattctl gpu-models`` and the fitting script."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group, main
from slurm_plugin.errors import ConfigError
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics.constants import constants
from slurm_plugin.physics.power import cap_slowdown, gpu_power_w

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"

# nvmlDeviceGetName strings (as nvidia-smi --query-gpu=name prints them) -> entry
NVML = {
    "Tesla V100-SXM2-32GB": "V100-SXM2-32GB",
    "Tesla V100-SXM2-32GB-LS": "V100-SXM2-32GB",    # DGX-1's lower-clock variant
    "NVIDIA V100-SXM2-32GB-LS": "V100-SXM2-32GB",
    "Tesla V100-SXM2-16GB": "V100-SXM2-16GB",
    "Tesla V100-PCIE-32GB": "V100-PCIE-32GB",
    "Tesla V100-PCIE-16GB": "V100-PCIE-16GB",
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB": "A100-PCIE-40GB",
    "A100-PCIE-40GB": "A100-PCIE-40GB",            # drivers before R470 print no prefix
    "NVIDIA A100 80GB PCIe": "A100-80GB-PCIE",
    "NVIDIA A40": "A40",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 80GB HBM3": "H100-80GB-HBM3",
    "NVIDIA H100 PCIe": "H100-PCIE",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200-NVL",
}
ALIASES = {
    "V100": "V100-SXM2-32GB", "V100-PCIE": "V100-PCIE-32GB",
    "A100": "A100-SXM4-80GB", "A100-80": "A100-SXM4-80GB", "A100-40": "A100-SXM4-40GB",
    "H100": "H100-80GB-HBM3", "H100-SXM": "H100-80GB-HBM3", "H100-PCIE": "H100-PCIE",
    "H100-NVL": "H100-NVL", "H200": "H200", "H200-NVL": "H200-NVL", "A40": "A40",
    "L40S": "L40S",
}


@pytest.mark.parametrize("nvml,key", sorted(NVML.items()))
def test_every_nvml_name_resolves_to_its_entry(nvml, key):
    assert gm.lookup(nvml).name == key
    assert gm.lookup(nvml.lower()).name == key
    assert gm.lookup("  " + nvml.replace(" ", "_") + " ").name == key


def test_catalogue_has_the_required_models_and_each_lists_its_nvml_name():
    assert set(NVML.values()) <= set(gm.names())
    for key in gm.names():
        m = gm.lookup(key)
        assert m.nvml_names and all(gm.lookup(n).name == key for n in m.nvml_names)


@pytest.mark.parametrize("alias,key", sorted(ALIASES.items()))
def test_short_aliases_mean_one_part(alias, key):
    assert gm.lookup(alias).name == key
    assert gm.lookup(alias.lower()).name == key


def test_no_spelling_names_two_entries():
    seen: dict[str, str] = {}
    for key in gm.names():
        m = gm.lookup(key)
        for n in (key, *m.nvml_names, *m.aliases):
            assert seen.setdefault(gm.normalise(n), key) == key, n
    assert gm.aliases() == {a: k for a, k in gm.aliases().items() if gm.lookup(a).name == k}


def test_normalise():
    assert gm.normalise("NVIDIA H100 80GB HBM3") == "H100-80GB-HBM3"
    assert gm.normalise("Tesla V100-SXM2-32GB") == "V100-SXM2-32GB"
    assert gm.normalise(" nvidia  a100__80gb   pcie ") == "A100-80GB-PCIE"
    assert gm.normalise("A100--40") == "A100-40"


def test_unknown_name_is_one_error_naming_it_with_the_close_names():
    with pytest.raises(ConfigError) as exc:
        gm.lookup("NVIDIA H300")
    msg = str(exc.value)
    assert "'NVIDIA H300'" in msg and "close names:" in msg
    assert "H100" in msg and "H200" in msg and "V100" not in msg
    with pytest.raises(ConfigError, match=r"close names: .*A100-PCIE-40.*") as exc:
        gm.lookup("A100-PCIE")            # ambiguous: not an alias, both PCIe parts offered
    assert "A100-PCIE-80" in str(exc.value)
    with pytest.raises(ConfigError, match=r"catalogued: V100-SXM2-32GB, .*H200-NVL"):
        gm.lookup("Radeon")


def test_every_entry_has_every_constant_with_a_source():
    cat = gm.catalogue()
    for key in gm.names():
        body = cat["models"][key]
        for c in gm.CONSTANTS:
            rec = body[c]
            assert rec["source"] in gm.SOURCES, (key, c)
            assert rec["how"] and rec["value"] is not None, (key, c)
            if rec["source"] == "measured":
                assert rec["rows"] >= 1, (key, c)
            if rec["source"] == "measured" and c in ("dynamic_power_w", "util_gamma",
                                                     "cap_beta", "interference_k"):
                h = rec["held_out"]          # a fit: its error on rows left out
                assert h["method"] and h["value"] > 0, (key, c)
    # what is measured where (docs/gpu-models.md's table)
    src = {k: gm.lookup(k).sources() for k in gm.names()}
    v100 = {c: s for c, s in src["V100-SXM2-32GB"].items() if c != "interference_k_mps"}
    assert set(v100.values()) - {"datasheet"} == {"measured"}
    for k in gm.names():        # no pair was measured under MPS: its k is the time-sliced one
        m = gm.lookup(k)
        assert src[k]["interference_k_mps"] == "carried-over", k
        assert m.interference_k_mps == m.interference_k, k
    assert src["A100-SXM4-80GB"]["dynamic_power_w"] == "measured"
    assert src["A40"]["cap_beta"] == src["A100-SXM4-40GB"]["cap_beta"] == "measured"
    for k in ("L40S", "H100-PCIE", "H200-NVL", "A100-80GB-PCIE"):
        assert "measured" not in src[k].values(), k
    for k in gm.names():
        if k != "V100-SXM2-32GB":
            assert src[k]["colocation_pairs"] == "carried-over"


def test_v100_sxm2_is_physics_json_v100_exactly():
    v100 = constants()["gpu_models"]["V100"]
    m = gm.lookup("V100")
    for c in ("idle_power_w", "dynamic_power_w", "util_gamma", "cap_beta", "max_power_w",
              "min_power_cap_w", "memory_mib"):
        assert getattr(m, c) == v100[c], c
    assert m.interference_k == constants()["interference"]["k"]
    assert m.interference_util_threshold == constants()["interference"]["util_threshold"]
    assert m.colocation_pairs == constants()["pairs"]
    for u in range(0, 101, 5):
        assert gm.power_at_util_w("Tesla V100-SXM2-32GB", u) == pytest.approx(gpu_power_w(u))
    for solo, cap in ((200, 150), (220, 100), (180, 250), (200, None)):
        assert m.cap_slowdown(solo, cap) == pytest.approx(cap_slowdown(solo, cap))


@pytest.mark.parametrize("key", list(gm.names()))
def test_curve_rises_from_idle_and_stays_within_the_limits(key):
    m = gm.lookup(key)
    curve = m.curve()
    assert [u for u, _ in curve] == list(range(0, 101, 10))
    ws = [w for _, w in curve]
    assert all(a < b for a, b in zip(ws, ws[1:])), ws
    assert ws[0] == pytest.approx(m.idle_power_w, abs=0.05)
    assert m.idle_power_w <= ws[-1] <= m.max_power_w
    assert 0 < m.idle_power_w < m.min_power_cap_w < m.max_power_w <= m.tdp_w
    assert m.memory_mib > 0 and 0 < m.util_gamma and 0 < m.cap_beta
    assert m.power_at_util_w(-10) == m.power_at_util_w(0)
    assert m.power_at_util_w(150) == m.power_at_util_w(100)
    # the cap: no slowdown above the job's draw, more below, clamped into the settable range
    p = m.power_at_util_w(100)
    assert m.cap_slowdown(p, m.max_power_w) == 1.0
    assert 1.0 < m.cap_slowdown(p, (m.min_power_cap_w + p) / 2) < m.cap_slowdown(p, 1.0)
    assert m.cap_slowdown(p, 1.0) == m.cap_slowdown(p, m.min_power_cap_w)


# ---- wattctl gpu-models ---------------------------------------------------------------------
def wattctl(*args):
    return CliRunner().invoke(group, ["gpu-models", *args])


def test_list_text_and_json():
    done = wattctl()
    assert done.exit_code == 0, done.output
    for key in gm.names():
        assert key in done.output
    assert "H100, H100-SXM" in done.output and "-> H100-80GB-HBM3" in done.output
    done = wattctl("--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert [m["name"] for m in data["models"]] == list(gm.names())
    h100 = next(m for m in data["models"] if m["name"] == "H100-80GB-HBM3")
    assert h100["nvml_names"] == ["NVIDIA H100 80GB HBM3"] and "H100" in h100["aliases"]
    assert set(h100["sources"]) == set(gm.CONSTANTS)
    assert h100["measured"] == ["idle_power_w"]
    assert data["aliases"]["H100"] == "H100-80GB-HBM3"


def test_show_prints_each_constant_with_its_source_and_the_curve():
    done = wattctl("show", "NVIDIA H100 80GB HBM3")
    assert done.exit_code == 0, done.output
    out = done.output
    for c in gm.CONSTANTS:
        assert f"  {c} = " in out, c
    assert "idle_power_w = 72.5 W  [measured]" in out
    assert "cap_beta = 0.84  [carried-over]" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("W "))
    assert [float(x) for x in line.split()[1:]] == [w for _, w in gm.lookup("H100").curve()]


def test_show_json_is_the_model_with_sources_and_power_at_util():
    done = wattctl("show", "a100", "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["name"] == "A100-SXM4-80GB"
    assert list(data["power_at_util_w"]) == [str(u) for u in range(0, 101, 10)]
    m = gm.lookup("A100")
    assert data["power_at_util_w"]["50"] == round(m.power_at_util_w(50), 1)
    assert data["constants"]["dynamic_power_w"]["source"] == "measured"
    assert data["constants"]["dynamic_power_w"]["held_out"]["method"].startswith("leave-one")
    done = wattctl("show", "V100", "H200", "--json")
    names = [d["name"] for d in json.loads(done.output)]
    assert names == ["V100-SXM2-32GB", "H200"]


def test_bad_name_is_one_error_and_exit_2(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["wattctl", "gpu-models", "show", "H300"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("wattctl: error:")
    assert "'H300'" in err and "close names: H200, H100" in err


def test_plot_writes_a_png_of_the_named_models(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curves.png"
    done = wattctl("show", "V100", "A100", "H100", "--plot", str(out))
    assert done.exit_code == 0, done.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert f"plot -> {out}" in done.output


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch, tmp_path):
    import builtins
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    done = wattctl("show", "V100", "--plot", str(tmp_path / "x.png"))
    assert done.exit_code != 0 and not (tmp_path / "x.png").exists()
    assert "wattbatch[plot]" in str(done.exception)
    assert done.output == ""          # said before the table is printed


# ---- the module stays light and off the submission path ---------------------------------------
def test_module_imports_only_light_modules_and_wrapper_never_imports_it():
    tree = ast.parse((REPO / "slurm_plugin" / "physics" / "gpu_models.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {(n.module or "") if isinstance(n, ast.ImportFrom) else n.names[0].name
             for n in top}
    assert names == {"__future__", "json", "re", "functools", "errors", "resources"}
    for p in (REPO / "wrapper").rglob("*.py"):
        assert "gpu_models" not in p.read_text(), p


# ---- the fitting script and the benchmark ----------------------------------------------------
sys.path.insert(0, str(REPO / "scripts"))


def test_datasheet_table_parsing(tmp_path):
    import fit_gpu_models as fgm
    f = tmp_path / "GPU-DATASHEETS.md"
    f.write_text(
        "| model | form factor | TDP (W) | min | memory (GB) | SMs | sources |\n"
        "|---|---|---|---|---|---|---|\n"
        "| H100 NVL | PCIe | 350-400 (configurable) | n/v | 94 (HBM3); nvidia-smi 95830 MiB "
        "= 93.6 GiB [12] | 132 | [5] |\n"
        "| H200 | SXM5 | up to 700 (configurable) | n/v | 141 (HBM3e) | 132 | [9] |\n"
        "| A100 80GB | SXM4 | 400 (500 W \"CTS\" variants exist) | n/v | 80 (HBM2e) | 108 "
        "| [1] |\n")
    rows = fgm.read_datasheets(f)
    assert set(rows) == {("H100 NVL", "PCIe"), ("H200", "SXM5"), ("A100 80GB", "SXM4")}
    assert rows[("H100 NVL", "PCIe")]["tdp_w"] == 400
    assert rows[("H100 NVL", "PCIe")]["nvml_mib"] == 95830
    assert rows[("H200", "SXM5")]["tdp_w"] == 700 and rows[("H200", "SXM5")]["memory_gb"] == 141
    assert rows[("H200", "SXM5")]["nvml_mib"] is None
    assert rows[("A100 80GB", "SXM4")]["tdp_w"] == 400


def test_curve_sums_fit_equals_the_brute_force_fit():
    import fit_gpu_models as fgm
    samples = {"a": [(10, 60.0), (50, 120.0), (90, 200.0)],
               "b": [(0, 45.0), (30, 100.0), (100, 230.0), (70, 170.0)]}
    sums = fgm.CurveSums(samples)
    idle = 40.0
    g, span = sums.fit(["a", "b"], idle)
    pts = samples["a"] + samples["b"]
    best = min((fgm.rp.rmse([(idle + s * (u / 100) ** gg, p) for u, p in pts]), gg, s)
               for gg in fgm.GAMMAS
               for s in [sum((u / 100) ** gg * (p - idle) for u, p in pts)
                         / sum((u / 100) ** (2 * gg) for u, _ in pts)])
    assert (g, span) == pytest.approx((best[1], best[2]))
    e, n = sums.sse("a", g, span, idle)
    assert n == 3 and e == pytest.approx(sum((idle + span * (u / 100) ** g - p) ** 2
                                             for u, p in samples["a"]))


needs_data = pytest.mark.skipif(not (SHARED / "power" / "GPU-DATASHEETS.md").is_file(),
                                reason="the shared measurement data is not next to the checkout")


@needs_data
def test_shipped_catalogue_is_what_the_script_writes(tmp_path):
    out = tmp_path / "gpu_models.json"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "fit_gpu_models.py"),
                           "--data-dir", str(SHARED), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    shipped = REPO / "slurm_plugin" / "data" / "gpu_models.json"
    assert json.loads(out.read_text()) == json.loads(shipped.read_text())


def test_script_and_benchmark_refuse_a_folder_without_the_data(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "fit_gpu_models.py"),
                           "--data-dir", str(tmp_path), "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "GPU-DATASHEETS.md not found" in done.stderr
    assert not (tmp_path / "x.json").exists()
    for d in (tmp_path, tmp_path / "nope"):
        done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu_models.py"),
                               "--data-dir", str(d)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "--data-dir" in done.stderr
        assert "Traceback" not in done.stderr
