"""The benchmark scripts' input checks and missing figures, run as a user runs them
(``python benchmarks/X.py``) on tiny inputs: a bad input is one error line and exit status 2,
a figure that cannot be computed is ``n/a``, never ``nan``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ROOT / "slurm_plugin" / "data" / "philly-first1000.csv"


def bench(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd or ROOT)


def test_scripts_import_the_checkout_from_anywhere(tmp_path):
    # no sys.path entry of the checkout but the script's own insert: run from another folder
    r = bench("bench_parse.py", "--nodes", "4", "--gpus", "2", "--jobs", "10", "--repeat", "1",
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "parse+attach" in r.stdout
    r = subprocess.run([sys.executable, "-c",
                        "import runpy, sys; sys.argv = ['x', '--help'];"
                        f"runpy.run_path({str(ROOT / 'benchmarks' / 'bench_collector.py')!r},"
                        " run_name='not_main'); import slurm_plugin; print(slurm_plugin.__file__)"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).resolve().is_relative_to(ROOT / "slurm_plugin")


def test_empty_or_missing_pollux_dir_is_an_error(tmp_path):
    for script in ("bench_elastic.py", "bench_ones.py"):
        for d in (tmp_path, tmp_path / "nope"):
            r = bench(script, "--pollux-dir", str(d))
            assert r.returncode == 2, (script, r.stdout, r.stderr)
            assert "--pollux-dir" in r.stderr and "Traceback" not in r.stderr


def test_argument_checks():
    for script, args in (("bench_ones.py", ("--philly-only",)),
                         ("bench_ones.py", ("--philly-only", "--philly", "x.csv",
                                            "--philly-jobs", "-5")),
                         ("bench_carbon_forecast.py", ("--stride-h", "0")),
                         ("bench_pal.py", ("--trace", "x", "--variability-dir", "y",
                                           "--seeds", "0")),
                         ("bench_simulate.py", ("--concat", "1")),
                         ("bench_simulate.py", ("--policies", "nosuch")),
                         ("bench_reconcile.py", ("--live", "0", "--release", "23.02")),
                         ("bench_reconcile.py", ("--live", "0", "--size", "10x")),
                         ("bench_year.py", ("--trace", "nosuch.csv")),
                         ("bench_year.py", ("--trace", str(BUILTIN), "--policies", "nosuch")),
                         ("bench_year.py", ("--trace", str(BUILTIN), "--repeat", "0"))):
        r = bench(script, *args)
        assert r.returncode == 2, (script, args, r.stdout, r.stderr)
        assert "error:" in r.stderr and "Traceback" not in r.stderr, (script, r.stderr)
    r = bench("bench_reconcile.py", "--live", "0", "--release", "23.02")
    assert "22.05" in r.stderr


def test_elastic_no_wait_is_na_not_nan(tmp_path):
    (tmp_path / "workload-1.csv").write_text(
        "name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,4,2048\n")
    r = bench("bench_elastic.py", "--pollux-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "nan" not in r.stdout
    assert "OVER" not in r.stdout and "n/a (no job waited" in r.stdout
    assert "goal elastic avg JCT <= 0.35x" in r.stdout


def test_carbon_forecast_short_series_left_out(tmp_path):
    lwa = tmp_path / "carbon" / "lets-wait-awhile"
    lwa.mkdir(parents=True)
    rows = [f"2024-01-{1 + h // 24:02d} {h % 24:02d}:00:00,{100 + h % 24}" for h in range(24 * 30)]
    (lwa / "xx_ci.csv").write_text("Time,Carbon Intensity\n" + "\n".join(rows) + "\n")
    r = bench("bench_carbon_forecast.py", "--data-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "too short" in r.stdout and "nan" not in r.stdout
    assert "LWA xx 2024" in r.stdout
    r = bench("bench_carbon_forecast.py", "--data-dir", str(tmp_path), "--only", "ZZZ")
    assert r.returncode == 2 and "--only ZZZ" in r.stderr


def test_influx_hang_bench_skips_after_the_first_submission_on_both_paths(tmp_path):
    r = bench("bench_influx_hang.py", "-n", "2", "--timeout-s", "0.2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "in-process (WATTBATCH_SERVER=0):" in out and "warm server:" in out
    assert out.count("InfluxDB hanging, first:") == 2
    assert out.count("(timed out, ") == 2                     # the first call of each path
    assert out.count("(skipped, 0; ") == 2                    # the next: no connection made
    assert "ran in the warm server: 2 of 2" in out
    assert out.count("goal each later submission <= 100 ms over the baseline:") == 2
    assert "note:" not in out and "nan" not in out
    r = bench("bench_influx_hang.py", "--paths", "nowhere")
    assert r.returncode == 2 and "--paths nowhere" in r.stderr and "Traceback" not in r.stderr


def test_year_bench_runs_each_policy_in_its_own_process():
    r = bench("bench_year.py", "--trace", str(BUILTIN), "--repeat", "2", "--nodes", "20",
              "--limit-jobs", "200", "--policies", "slurm-default,pal+eaco")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()
            if line.startswith(("slurm-default ", "pal+eaco "))]
    assert [row[:2] for row in rows] == [["slurm-default", "200"], ["pal+eaco", "200"]]
    assert "goal every policy within 15 minutes: n/a" in r.stdout    # a part: no verdict
