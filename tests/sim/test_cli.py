"""``wattctl simulate`` through click: golden results, bad input, outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_plugin.cli import group

GOLDEN = Path(__file__).parent / "golden"
POLICIES = "slurm-default,fifo-packed,gandiva,slurm-powersave,oracle-bound"
SMALL = ["--trace", str(GOLDEN / "small_trace.csv"), "--trace-format", "canonical",
         "--nodes", "2", "--gpus-per-node", "4"]


def run(*args: str):
    return CliRunner().invoke(group, ["simulate", *args])


def _stable(results: list[dict]) -> list[dict]:
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()
             if k != "sim_wall_s"} for r in results]


def test_golden_compare_on_small_trace():
    res = run(*SMALL, "--compare", POLICIES, "--json", "--seed", "1")
    assert res.exit_code == 0, res.output
    got = _stable(json.loads(res.stdout))
    path = GOLDEN / "small_compare.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())
    names = [r["policy"] for r in got]
    assert names == POLICIES.split(",")
    oracle = got[-1]
    assert all(r["energy_kwh"] >= oracle["energy_kwh"] for r in got)


def test_json_has_every_issue_field_and_is_deterministic():
    a = json.loads(run(*SMALL, "--policy", "fifo-packed", "--json").output)
    b = json.loads(run(*SMALL, "--policy", "fifo-packed", "--json").output)
    for f in ("policy", "jobs", "jobs_finished", "energy_kwh", "gpu_energy_kwh", "carbon_kg",
              "avg_jct_s", "p50_jct_s", "p99_jct_s", "geomean_jct_s", "makespan_s", "avg_queue_s",
              "avg_runtime_stretch", "gpu_alloc_of_powered", "gpu_alloc_of_installed",
              "sharing_factor", "jobs_per_busy_gpu", "sm_util_of_powered", "sim_wall_s", "events",
              "energy_over_oracle", "energy_over_shared_oracle"):
        assert f in a
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b


def test_builtin_trace_runs_without_arguments_but_the_policy():
    res = run("--policy", "slurm-default", "--limit-jobs", "50")
    assert res.exit_code == 0, res.output
    assert "energy_kwh" in res.output and "avg_jct_s" in res.output


def test_class_mix_is_recorded_and_all_is_the_default(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,duration_s,num_gpus\n" +
                     "".join(f"{i},{10 * i},{600 + i},1\n" for i in range(40)))
    args = ["--trace", str(trace), "--trace-format", "canonical", "--nodes", "2",
            "--gpus-per-node", "4", "--compare", "slurm-default,oracle-bound", "--json"]
    plain = json.loads(run(*args).output)
    every = json.loads(run(*args, "--class-mix", "all").output)
    paper = json.loads(run(*args, "--class-mix", "eaco-paper").output)
    for r in plain + every:
        assert r["class_mix"] == "all" and len(r["classes"]) == 8
    assert _stable(plain) == _stable(every)
    for r in paper:
        assert r["class_mix"] == "eaco-paper" and r["classes"] == ["alexnet", "resnet18", "vgg16"]
    # the small classes draw less power than the mix of all eight
    assert paper[1]["energy_kwh"] < plain[1]["energy_kwh"]


def test_unknown_class_in_mix_is_an_input_error():
    res = run(*SMALL, "--policy", "slurm-default", "--class-mix", "alexnet,bert")
    assert res.exit_code != 0
    assert "'bert' is not a known job class" in res.output + str(res.exception)


def test_compare_table_shows_ratios_to_the_first():
    res = run(*SMALL, "--compare", "slurm-default,slurm-powersave")
    assert res.exit_code == 0, res.output
    assert "x)" in res.output and res.output.splitlines()[0].split()[1] == "slurm-default"


@pytest.mark.parametrize("names", ["eaco,eaco", "eaco,,gandiva", "eaco,"])
def test_compare_names_each_policy_once(names):
    res = run(*SMALL, "--compare", names)
    assert res.exit_code == 2 and "give each policy once" in res.output, res.output


def test_timeline_integrates_to_the_energy(tmp_path):
    tl = tmp_path / "tl.csv"
    res = run(*SMALL, "--policy", "gandiva", "--json", "--timeline", str(tl))
    assert res.exit_code == 0, res.output
    energy = json.loads(res.stdout)["energy_kwh"]
    lines = tl.read_text().splitlines()
    head = lines[0].split(",")
    rows = [dict(zip(head, map(float, ln.split(",")))) for ln in lines[1:]]
    assert sum(r["power_w"] * r["duration_s"] for r in rows) / 3.6e6 == pytest.approx(energy, rel=1e-4)


def test_cluster_file_and_carbon_file(tmp_path):
    c = tmp_path / "c.toml"
    c.write_text('[cluster]\nnodes = 2\ngpus_per_node = 4\nsuspend_time_s = 60.0\n')
    res = run("--trace", str(GOLDEN / "small_trace.csv"), "--trace-format", "canonical",
              "--cluster", str(c), "--policy", "slurm-default", "--json", "--zone", "DE-LU")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["carbon_zone"] == "DE-LU" and out["node_suspends"] > 0


def _bad(tmp_path: Path, text: str, fmt: str = "canonical", *extra: str):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    return run("--trace", str(p), "--trace-format", fmt, "--nodes", "2", "--gpus-per-node", "4",
               "--policy", "slurm-default", *extra), p


@pytest.mark.parametrize("text, line, field", [
    ("job_id,submit_s,num_gpus\n1,0,1\n", 1, "duration_s"),
    ("job_id,submit_s,duration_s,num_gpus\n1,0,100,1\n2,5,-3,1\n", 3, "duration_s"),
    ("job_id,submit_s,duration_s,num_gpus\n1,0,abc,1\n", 2, "duration_s"),
    ("job_id,submit_s,duration_s,num_gpus\n1,0,10,1\n2,0,10,0\n", 3, "num_gpus"),
    ("job_id,submit_s,duration_s,num_gpus\n1,0,10,1\n2,0,10,9\n", 3, "num_gpus"),
    ("job_id,submit_s,duration_s,num_gpus,app\n1,0,10,1,bogus\n", 2, "app"),
    ("job_id,submit_s,duration_s,num_gpus,min_gpus,max_gpus\n1,0,10,2,1,4\n2,0,10,2,3,2\n",
     3, "min_gpus"),
    ("job_id,submit_s,duration_s,num_gpus\n", 2, None),
])
def test_bad_trace_names_file_line_and_field(tmp_path, text, line, field):
    res, p = _bad(tmp_path, text)
    assert res.exit_code != 0
    msg = res.output + (str(res.exception) if res.exception else "")
    assert str(p) in msg and f"line {line}" in msg
    if field:
        assert f"field {field}" in msg
    else:
        assert "empty" in msg


def test_bad_philly_timestamp(tmp_path):
    res, p = _bad(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-01 00:00:00,5,1,5,x\n",
                  "philly")
    assert res.exit_code != 0
    msg = res.output + str(res.exception)
    assert "line 2" in msg and "field timestamp" in msg


def test_unknown_policy_and_zone(tmp_path):
    res = run(*SMALL, "--policy", "no-such-policy")
    assert res.exit_code != 0 and "slurm-default" in res.output + str(res.exception)
    res = run(*SMALL, "--policy", "slurm-default", "--zone", "XX")
    assert res.exit_code != 0 and "XX" in res.output + str(res.exception)


def test_bad_cluster_file_names_key(tmp_path):
    c = tmp_path / "c.toml"
    c.write_text('[cluster]\nnodes = "many"\n')
    res = run("--cluster", str(c), "--policy", "slurm-default")
    assert res.exit_code != 0 and "cluster.nodes" in res.output + str(res.exception)


def test_plot_needs_matplotlib(tmp_path):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        res = run(*SMALL, "--policy", "slurm-default", "--plot", str(tmp_path / "p.png"))
        assert res.exit_code != 0 and "matplotlib" in res.output
    else:
        res = run(*SMALL, "--policy", "slurm-default", "--plot", str(tmp_path / "p.png"))
        assert res.exit_code == 0 and (tmp_path / "p.png").stat().st_size > 0


def test_carbon_budget_reaches_greenflow_and_a_tight_one_defers():
    from slurm_plugin.sim.run import period_budget
    from slurm_plugin.sim.trace import TraceJob
    jobs = [TraceJob("1", 100.0, 60.0, 1, 2), TraceJob("2", 7300.0, 60.0, 1, 3)]
    assert period_budget(jobs, 2.5) == {"budget_kg": 2.5, "budget_start_s": 100.0,
                                        "budget_period_s": 7200.0}
    res = run("--limit-jobs", "200", "--zone", "GB", "--policy", "greenflow",
              "--carbon-budget-kg", "1", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["actions"].get("defer", 0) > 0


def test_carbon_file_in_the_current_electricity_maps_header_with_gaps(tmp_path):
    """Electricity Maps' current export header ("Zone id", "... (Life cycle)") is read, and an
    hour without a value is skipped with a warning, not an error."""
    lines = ["Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
             "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),"
             "Renewable energy percentage (RE%),Data source,Data estimated,"
             "Data estimation method"]
    for h in range(15 * 24):
        value = "" if h in (30, 31) else f"{200 + 50 * (h % 24 < 12):.1f}"
        lines.append(f"2023-01-{1 + h // 24:02d} {h % 24:02d}:00:00,Germany,Germany,DE-LU,"
                     f"{value},{value},50,50,x,false,")
    carbon = tmp_path / "DE-LU_2023_hourly.csv"
    carbon.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(carbon), "--zone", "DE-LU")
    assert res.exit_code == 0, res.output
    assert "2 row(s) without a value skipped (line 32, 33)" in res.output
    res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(carbon), "--zone", "GB")
    assert res.exit_code != 0 and "the file holds zone 'DE-LU'" in str(res.exception)


def test_jobs_killed_at_their_limits_are_warned_about(tmp_path):
    """Co-location slows jobs whose limits are their run alone: gandiva and fifo-packed have
    them killed, which shortens their JCT; the comparison says so."""
    rows = ["job_id,submit_s,duration_s,num_gpus,user,app,deadline_s,min_gpus,max_gpus,"
            "time_limit_s"]
    rows += [f"j{i},{5 * i},3000,1,u,vgg16,,,,3000" for i in range(16)]
    trace = tmp_path / "tight.csv"
    trace.write_text("\n".join(rows) + "\n")
    res = CliRunner().invoke(group, ["simulate", "--trace", str(trace), "--trace-format",
                                     "canonical", "--nodes", "1", "--gpus-per-node", "4",
                                     "--compare", "slurm-default,gandiva", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out[0]["jobs_timed_out"] == 0 and out[1]["jobs_timed_out"] > 0
    assert out[1]["avg_jct_s"] < out[0]["avg_jct_s"]        # the flattering figure
    warned = [line for line in res.stderr.splitlines() if "killed at their time limits" in line]
    assert len(warned) == 1 and warned[0].startswith(
        f"warning: gandiva: {out[1]['jobs_timed_out']} of 16 jobs")


def _em_file(path: Path, zones: list[str], hours: range, skip: range = range(0)) -> Path:
    lines = ["Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
             "Carbon Intensity gCO₂eq/kWh (LCA)"]
    for h in hours:
        if h in skip:
            continue
        lines.append(f"2023-01-{1 + h // 24:02d} {h % 24:02d}:00:00,{zones[h % len(zones)]},"
                     f"{100 + h % 24},{150 + h % 24}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_zone_is_checked_against_the_file_whatever_its_name(tmp_path):
    """A file's name does not stand in for its Zone Id; a bidding zone named after the file's
    country (DE-LU for Zone Id DE, as Electricity Maps exports it) and another case match; no
    --zone: the file's own."""
    texas = _em_file(tmp_path / "for_GB_site.csv", ["US-TEX-ERCO"], range(15 * 24))
    for zone in ("GB", "US", "E"):
        res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(texas), "--zone", zone)
        assert res.exit_code != 0 and "the file holds zone 'US-TEX-ERCO'" in str(res.exception)
    for zone, label in (("us-tex-erco", "US-TEX-ERCO"), (None, "US-TEX-ERCO")):
        res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(texas), "--json",
                  *(("--zone", zone) if zone else ()))
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["carbon_zone"] == label
    de = _em_file(tmp_path / "de.csv", ["DE"], range(15 * 24))
    res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(de), "--zone", "DE-LU",
              "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["carbon_zone"] == "DE-LU"


def test_missing_hours_and_mixed_zones_are_reported(tmp_path):
    gap = _em_file(tmp_path / "gap.csv", ["GB"], range(15 * 24), skip=range(50, 98))
    res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(gap), "--zone", "GB", "--json")
    assert res.exit_code == 0, res.output
    note = ("48 hour(s) missing in 1 gap(s) (the longest: 48 h, 2023-01-03 02:00 to "
            "2023-01-05 01:00 UTC); each is filled with the hour before it")
    assert note in res.stderr and note in json.loads(res.stdout)["carbon_warnings"][0]
    mixed = _em_file(tmp_path / "mixed.csv", ["GB", "FR"], range(15 * 24))
    res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(mixed), "--zone", "GB")
    assert res.exit_code != 0
    assert "mixed.csv:3: field 'Zone Id' = 'FR': the file mixes zones GB (line 2) and FR" \
        in str(res.exception)


def test_direct_emissions_basis(tmp_path):
    f = _em_file(tmp_path / "gb.csv", ["GB"], range(15 * 24))
    out = {}
    for basis in ("lca", "direct"):
        res = run(*SMALL, "--policy", "slurm-default", "--carbon", str(f), "--json",
                  "--carbon-basis", basis)
        assert res.exit_code == 0, res.output
        out[basis] = json.loads(res.stdout)["carbon_kg"]
    assert out["direct"] < out["lca"]       # every hour's direct value is 50 below


def test_a_plot_that_cannot_be_written_stops_before_the_run(tmp_path):
    pytest.importorskip("matplotlib")
    res = run(*SMALL, "--policy", "slurm-default", "--plot", str(tmp_path / "no" / "p.png"))
    assert res.exit_code != 0 and res.stdout == ""
    assert f"--plot {tmp_path / 'no' / 'p.png'}: cannot write (no folder" in str(res.exception)


def test_a_budget_is_reported_against_and_a_policy_without_one_is_named():
    res = run("--limit-jobs", "100", "--zone", "GB", "--compare", "greenflow,slurm-default",
              "--carbon-budget-kg", "1", "--json")
    assert res.exit_code == 0, res.output
    green, plain = json.loads(res.stdout)
    assert green["carbon_budget_kg"] == plain["carbon_budget_kg"] == 1.0
    assert green["carbon_over_budget"] == pytest.approx(green["carbon_kg"])
    assert "slurm-default plans to no carbon budget" in res.stderr
    assert "greenflow: " in res.stderr and "over the budget of 1.0 kg" in res.stderr


def test_pollux_jobs_read_clamped_are_warned_about_and_too_large_names_its_column(tmp_path):
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\n"
                     "cifar10-0,0,cifar10,2,100000000\nncf-1,10,ncf,1,256\n")
    res = run("--trace", str(trace), "--trace-format", "pollux", "--nodes", "2",
              "--gpus-per-node", "4", "--policy", "slurm-default", "--json")
    assert res.exit_code == 0, res.output
    assert "1 job(s) with batch_size outside its application's measured batch sizes" in res.stderr
    json.loads(res.stdout)
    trace.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,16,2048\n")
    res = run("--trace", str(trace), "--trace-format", "pollux", "--nodes", "2",
              "--gpus-per-node", "4", "--policy", "slurm-default")
    assert res.exit_code != 0
    assert "line 2: field num_replicas: 16 GPUs is larger than the cluster" in str(res.exception)
