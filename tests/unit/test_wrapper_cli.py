"""wattbatch end to end against a fake sbatch that records what it was given."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from slurm_plugin.model import Cluster, Gpu, Node, Placement, Readings
from slurm_plugin.policy import registry
from wrapper.cli import Io, Providers, run

FAKE_SBATCH = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_DIR/argv"
cat > "$FAKE_DIR/stdin"
echo "SLURM_CONF=${SLURM_CONF:-}" > "$FAKE_DIR/env"
case " $* " in *" --bogus "*) echo "sbatch: unrecognized option '--bogus'" >&2; exit 255;; esac
case " $* " in *" --parsable "*) echo 77;; *) echo "Submitted batch job 77";; esac
"""
SCRIPT = "#!/bin/bash\n#SBATCH -J train --gres=gpu:1\n#WATTBATCH app=bert\necho hi\n"
CLUSTER = Cluster(nodes=(Node("gpu1", gpus=tuple(
    Gpu("gpu1", i, gres_type=f"g{i}", shards_total=4) for i in range(4))),))


class Share:
    name = "test-share"

    def advise(self, request, ctx):
        node = ctx.cluster.nodes[0].name
        return Placement(self.name, request.gpus, nodes=(node,), gpu_indexes=(1,),
                         share_mode="shard", shards=2, why=(f"share gpu 1 of {node}",))

    def reconcile(self, ctx):
        return ()


class Broken(Share):
    name = "test-broken"

    def advise(self, request, ctx):
        raise RuntimeError("policy exploded\nsecond line")


registry.register("test-share", Share)
registry.register("test-broken", Broken)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    site = tmp_path / "site.toml"
    site.write_text(f'[slurm]\nbin_dir = "{bin_dir}"\nconf = "/etc/x/slurm.conf"\n')
    (tmp_path / "job.sh").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(fake, argv, stdin=b"", env=None, providers=None):
    environ = {"WATTBATCH_SITE_CONFIG": str(fake / "site.toml"), "PATH": os.environ["PATH"],
               **(env or {})}
    out, err = io.StringIO(), io.StringIO()
    calls = []
    prov = providers or Providers(
        snapshot=lambda cfg: calls.append("snap") or CLUSTER,
        readings=lambda cfg, c, now, carbon: calls.append(f"readings carbon={carbon}") or Readings())
    rc = run(argv, Io(environ, io.BytesIO(stdin), out, err), prov, now_s=1000.0)
    argv_file = fake / "argv"
    sent = argv_file.read_text().splitlines() if argv_file.exists() else None
    return rc, out.getvalue(), err.getvalue(), sent, calls


def test_baseline_passes_everything_and_tags_the_comment(fake):
    rc, out, err, sent, calls = _run(fake, ["--parsable", "-p", "gpu", "job.sh", "a", "-J", "b"])
    assert (rc, out, err) == (0, "77\n", "")
    assert sent == ["--parsable", "-p", "gpu", "--comment=wb:policy=slurm-default;app=bert",
                    "job.sh", "a", "-J", "b"]
    assert calls == []                                    # baseline never asked for a snapshot
    assert (fake / "env").read_text() == "SLURM_CONF=/etc/x/slurm.conf\n"


def test_shared_placement_goes_to_sbatch_and_script_is_rendered(fake):
    rc, out, err, sent, calls = _run(fake, ["--wb-policy", "test-share", "--wb-explain", "job.sh"])
    assert rc == 0 and out == "Submitted batch job 77\n" and calls == ["snap"]
    assert sent == ["--nodelist=gpu1", "--gres=shard:g1:2",
                    "--comment=wb:policy=test-share;app=bert;share=shard:2"]
    script = (fake / "stdin").read_text()
    assert script.startswith("#!/bin/bash\n#SBATCH -J train --gres=gpu:1\n#WATTBATCH app=bert\n"
                             "# >>> wattbatch") and script.endswith("# <<< wattbatch\necho hi\n")
    assert "export WATTBATCH_SHARE_MODE=shard" in script
    assert "wattbatch: explain: share gpu 1 of gpu1" in err


@pytest.mark.parametrize("policy,carbon", [("eaco", False), ("greenflow", True),
                                           ("carbon-threshold", True)])
def test_carbon_is_read_only_for_a_policy_that_plans_with_it(fake, policy, carbon):
    rc, _, err, _, calls = _run(fake, ["--wb-policy", policy, "--wb-share", "--wb-slack=6h",
                                       "--gres=gpu:1", "-t", "60", "job.sh"])
    assert rc == 0, err
    assert f"readings carbon={carbon}" in calls and f"readings carbon={not carbon}" not in calls


def test_rendered_script_keeps_script_name_and_args(fake):
    (fake / "job.sh").write_text(SCRIPT.replace("#SBATCH -J train ", "#SBATCH "))
    rc, _, _, sent, _ = _run(fake, ["--wb-policy=test-share", "job.sh", "x y"])
    assert rc == 0 and "--job-name=job.sh" in sent
    assert sent[-1] == "x y" and sent[-2].endswith(".sbatch") and not Path(sent[-2]).exists()


def test_wrap_and_stdin(fake):
    rc, _, _, sent, _ = _run(fake, ["--wrap", "echo hi", "-t", "5"])
    assert rc == 0 and sent == ["--wrap", "echo hi", "-t", "5", "--comment=wb:policy=slurm-default"]
    rc, _, _, sent, _ = _run(fake, ["-t", "5"], stdin=SCRIPT.encode())
    assert rc == 0 and sent == ["-t", "5", "--comment=wb:policy=slurm-default;app=bert"]
    assert (fake / "stdin").read_text() == SCRIPT
    rc, _, _, sent, _ = _run(fake, ["--wb-policy", "test-share", "--wrap", "echo hi"])
    assert "--wrap" not in sent and "--job-name=wrap" in sent
    assert (fake / "stdin").read_text().startswith("#!/bin/sh\n# This script was created by sbatch")


def test_dry_run_and_json_submit_nothing(fake):
    rc, out, _, sent, _ = _run(fake, ["--wb-dry-run", "--wb-policy", "test-share", "job.sh"])
    assert rc == 0 and sent is None
    assert "# wattbatch: share gpu 1 of gpu1" in out and "export WATTBATCH_SHARDS=2" in out
    rc, out, _, sent, _ = _run(fake, ["job.sh"], env={"WATTBATCH_JSON": "1"})
    doc = json.loads(out)
    assert rc == 0 and sent is None and doc["policy"] == "slurm-default"
    assert doc["request"]["app"] == "bert" and doc["script"] == SCRIPT


def test_fail_open_one_warning_and_unchanged_submission(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-policy", "test-broken", "job.sh"])
    assert rc == 0 and out == "Submitted batch job 77\n" and sent == ["job.sh"]
    assert err.count("\n") == 1 and err.startswith("wattbatch: warning: policy exploded second")
    (fake / "site.toml").write_text("[slurm]\nnot_a_key = 1\n")
    rc, _, err, sent, _ = _run(fake, ["-J", "x", "job.sh"])
    assert rc == 0 and sent == ["-J", "x", "job.sh"]
    assert err.count("\n") == 1 and "slurm.not_a_key" in err and err.startswith("wattbatch: warning:")

    def down(cfg):
        raise OSError("influx down")
    rc, _, err, sent, _ = _run(fake, ["--wb-policy", "test-share", "job.sh"],
                               providers=Providers(snapshot=down, readings=down))
    assert rc == 0 and sent == ["job.sh"] and err.count("\n") == 1


def test_sbatch_errors_are_relayed_as_they_are(fake):
    rc, out, err, _, _ = _run(fake, ["--bogus", "job.sh"])
    assert (rc, out, err) == (255, "", "sbatch: unrecognized option '--bogus'\n")
    rc, _, err, sent, _ = _run(fake, ["missing.sh"])     # sbatch reports the missing file
    assert sent == ["missing.sh"] and err == ""


def test_bad_wattbatch_option_on_the_command_line_exits_255_and_submits_nothing(fake):
    rc, _, err, sent, _ = _run(fake, ["--wb-bogus", "job.sh"])
    assert rc == 255 and sent is None and "valid options: --wb-dry-run" in err
    rc, _, err, sent, _ = _run(fake, ["--wb-gpu-mem=abc", "job.sh"])
    assert rc == 255 and sent is None
    assert err == ("wattbatch: command line: --wb-gpu-mem='abc': expected a positive number "
                   "of MiB\n")
    for bad, why in (("--wb-batch-size=0-64", "1 <= MIN <= MAX"),
                     ("--wb-batch-size=512-64", "1 <= MIN <= MAX"),
                     ("--wb-batch-size=-", "expected MIN-MAX global batch sizes"),
                     ("--wb-lr-scaling=cubic", "expected linear or sqrt")):
        rc, _, err, sent, _ = _run(fake, [bad, "job.sh"])
        assert rc == 255 and sent is None and why in err, (bad, err)


def test_a_batch_size_range_goes_into_the_tag(fake):
    rc, _, _, sent, _ = _run(fake, ["--wb-batch-size=64-1024", "--wb-lr-scaling=sqrt", "job.sh"])
    assert rc == 0 and "--comment=wb:policy=slurm-default;app=bert;batch=64-1024;lr=sqrt" in sent


@pytest.mark.parametrize("argv, said", [
    (["--wb-app=cifar10", "--wb-batch-size=8-64"],
     "--wb-batch-size=8-64: outside cifar10's profiled global batch sizes (128-4096), so no "
     "batch can be advised and the job keeps its own; give a range that meets 128-4096"),
    (["--wb-app=cifar10", "--wb-batch-size=8192-16384"], "outside cifar10's profiled"),
    (["--wb-batch-size=64-1024"],     # the script's #WATTBATCH app=bert: profiled, 12-384
     None),
    (["--wb-app=resnet18", "--wb-batch-size=64-1024"], "--wb-app='resnet18' has none"),
])
def test_a_batch_range_no_advice_can_use_is_said_once_and_the_job_goes_in(fake, argv, said):
    rc, out, err, sent, _ = _run(fake, [*argv, "job.sh"])
    assert rc == 0 and out == "Submitted batch job 77\n" and sent is not None
    if said is None:
        assert "warning" not in err, err
        return
    assert err.count("\n") == 1 and err.startswith("wattbatch: warning: command line: ")
    assert said in err, err


def test_a_batch_range_without_an_application_says_which_to_name(fake):
    (fake / "job.sh").write_text("#!/bin/sh\ntrue\n")
    rc, _, err, sent, _ = _run(fake, ["--wb-batch-size=64-1024", "job.sh"])
    assert rc == 0 and sent is not None
    assert "no --wb-app names one" in err and "bert, cifar10" in err, err


def test_a_batch_range_within_the_profile_is_taken_silently(fake):
    rc, _, err, _, _ = _run(fake, ["--wb-app=cifar10", "--wb-batch-size=64-1024", "job.sh"])
    assert rc == 0 and err == ""          # 64-1024 meets the profiled 128-4096
    rc, _, err, _, _ = _run(fake, ["--wb-app=cifar10", "--wb-batch-size=128-1024",
                                   "--wb-lr-scaling=sqrt", "--wb-explain", "job.sh"])
    assert rc == 0 and "warning" not in err and \
        "wattbatch: explain: batch size 128-1024 (sqrt learning-rate rule)" in err, err


@pytest.mark.parametrize("env, script_line, named", [
    ({"WATTBATCH_POLICY": "nosuch"}, "", "$WATTBATCH_POLICY: --wb-policy='nosuch': unknown policy"),
    ({}, "#WATTBATCH policy=nosuch\n", "script line 2: --wb-policy='nosuch': unknown policy"),
    ({"WATTBATCH_GPU_MEM": "abc"}, "", "$WATTBATCH_GPU_MEM: --wb-gpu-mem='abc'"),
    ({"WATTBATCH_ELASTIC": "9-1"}, "", "--wb-elastic='9-1': expected 1 <= MIN <= MAX"),
    ({}, "#WATTBATCH app='x\n", "script line 2: malformed #WATTBATCH line"),
    ({}, "#WATTBATCH --bogus\n", "script line 2: malformed #WATTBATCH word '--bogus'"),
])
def test_bad_settings_from_environment_or_script_warn_once_and_submit_unchanged(
        fake, env, script_line, named):
    (fake / "job.sh").write_text("#!/bin/sh\n" + script_line + "true\n")
    rc, out, err, sent, _ = _run(fake, ["-J", "x", "job.sh"], env=env)
    assert (rc, out, sent) == (0, "Submitted batch job 77\n", ["-J", "x", "job.sh"])
    assert err.count("\n") == 1 and err.startswith("wattbatch: warning: ") and named in err
    assert err.endswith("; submitting the job unchanged\n") and "invalid literal" not in err


def test_dry_run_from_the_environment_is_said_every_time(fake):
    for _ in range(2):
        rc, out, err, sent, _ = _run(fake, ["job.sh"], env={"WATTBATCH_DRY_RUN": "1"})
        assert rc == 0 and sent is None and out.startswith("# wattbatch: policy")
        assert err == ("wattbatch: note: $WATTBATCH_DRY_RUN is set: dry run, nothing submitted "
                       "(unset it to submit)\n")
    rc, _, err, _, _ = _run(fake, ["--wb-dry-run", "job.sh"])
    assert rc == 0 and err == ""


def test_json_dry_run_prints_a_document_when_the_decision_fails_open(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-json", "--wb-policy", "test-broken", "job.sh"])
    doc = json.loads(out)
    assert rc == 0 and sent is None and err.startswith("wattbatch: warning: policy exploded")
    assert doc["submitted"] is False and doc["script"] == SCRIPT
    assert doc["unchanged_reason"] == "policy exploded second line"


def test_users_slurm_conf_wins_over_the_sites(fake, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", "/home/me/other/slurm.conf")
    _run(fake, ["job.sh"], env={"SLURM_CONF": "/home/me/other/slurm.conf"})
    assert (fake / "env").read_text() == "SLURM_CONF=/home/me/other/slurm.conf\n"
    monkeypatch.delenv("SLURM_CONF")
    _run(fake, ["job.sh"])
    assert (fake / "env").read_text() == "SLURM_CONF=/etc/x/slurm.conf\n"


def test_help_and_off(fake):
    rc, out, _, sent, _ = _run(fake, ["--wb-help"])
    assert rc == 0 and "--wb-opt-out" in out and sent is None
    rc, _, _, sent, _ = _run(fake, ["--wb-off", "--wb-policy", "test-share", "job.sh"])
    assert sent == ["job.sh"]


# --- a dry run never submits ------------------------------------------------------------------

@pytest.mark.parametrize("argv, env, named", [
    (["--wb-dry-run", "--bogus", "job.sh"], {}, "unrecognized option '--bogus'"),
    (["--wb-json", "-G", "1", "--time"], {}, "option '--time' requires an argument"),
    (["--parsable=1", "job.sh"], {"WATTBATCH_DRY_RUN": "1"}, "'--parsable' doesn't allow"),
    (["--wb-dry-run", "-G", "1", "nonexist.sh"], {}, "cannot read the script 'nonexist.sh'"),
    (["--wb-dry-run", "--wrap=true", "job.sh"], {}, "--wrap and a script ('job.sh')"),
])
def test_a_dry_run_sbatch_would_reject_is_an_error_and_submits_nothing(fake, argv, env, named):
    rc, out, err, sent, _ = _run(fake, argv, env=env)
    assert (rc, out, sent) == (255, "", None)
    assert err.startswith("wattbatch: error: dry run (") and named in err, err
    assert err.endswith("; nothing submitted (" + err.rpartition("(")[2]) and err.count("\n") == 1


def test_an_sbatch_option_wattbatch_cannot_read_in_the_script_stops_a_dry_run(fake):
    (fake / "job.sh").write_text("#!/bin/bash\n#SBATCH --bogus=1\n#WATTBATCH dry-run\ntrue\n")
    rc, out, err, sent, _ = _run(fake, ["job.sh"])
    assert (rc, out, sent) == (255, "", None)
    assert err == ("wattbatch: error: dry run (script line 3): sbatch would reject job.sh line 2: "
                   "unrecognized option '--bogus'; nothing submitted (fix or remove that "
                   "#SBATCH option)\n")
    rc, _, _, sent, _ = _run(fake, ["job.sh"], env={"WATTBATCH_OFF": "1"})   # sbatch says why
    assert sent == ["job.sh"]


def test_options_of_newer_sbatch_releases_are_understood_in_a_dry_run(fake):
    (fake / "job.sh").write_text(SCRIPT.replace("--gres=gpu:1", "--tres-per-task=gres/gpu:1"))
    rc, out, err, sent, _ = _run(fake, ["--wb-dry-run", "--segment=2", "--stepmgr", "job.sh"])
    assert (rc, sent, err) == (0, None, "") and out.startswith("# wattbatch: policy slurm-default")
    rc, out, _, sent, _ = _run(fake, ["--wb-json", "--oom-kill-step", "--resv-ports", "job.sh"])
    assert rc == 0 and sent is None and json.loads(out)["submitted"] is False


def test_a_dry_run_of_what_wattbatch_leaves_alone_prints_it_unchanged(fake):
    for argv in (["--wb-dry-run", "--wb-off", "job.sh"], ["-n1", ":", "-n2", "job.sh"]):
        rc, out, err, sent, _ = _run(fake, argv, env={"WATTBATCH_DRY_RUN": "1"})
        assert (rc, sent) == (0, None) and out.startswith("# wattbatch: would submit unchanged: ")
        assert out.endswith(SCRIPT)


@pytest.mark.parametrize("env, script_line, why", [
    ({"WATTBATCH_DRY_RUN": "1", "WATTBATCH_BATCH_SIZE": "0-100"}, "",
     "$WATTBATCH_BATCH_SIZE: --wb-batch-size='0-100'"),
    ({}, "#WATTBATCH slack=6x elastic=4-1\n#WATTBATCH dry-run\n", "script line 2: --wb-slack='6x'"),
    ({"WATTBATCH_DRY_RUN": "1", "WATTBATCH_POLICY": "nosuch"}, "", "--wb-policy='nosuch'"),
])
def test_a_dry_run_asked_for_anywhere_survives_a_bad_setting_beside_it(fake, env, script_line, why):
    text = "#!/bin/sh\n" + script_line + "true\n"
    (fake / "job.sh").write_text(text)
    rc, out, err, sent, _ = _run(fake, ["-J", "x", "job.sh"], env=env)
    assert (rc, sent) == (0, None) and err.count("\n") == 1 and why in err
    assert err.startswith("wattbatch: warning: ") and err.endswith(
        "the job would be submitted unchanged, nothing submitted\n")
    assert out.startswith("# wattbatch: would submit unchanged: ") and out.endswith(text)
    rc, out, _, sent, _ = _run(fake, ["job.sh"], env={**env, "WATTBATCH_JSON": "1"})
    assert (rc, sent) == (0, None) and json.loads(out)["submitted"] is False


@pytest.mark.parametrize("env, script_line, named", [
    ({"WATTBATCH_DRY_RUN": "maybe"}, "", "$WATTBATCH_DRY_RUN='maybe': expected 1/0"),
    ({"WATTBATCH_JSON": "2"}, "", "$WATTBATCH_JSON='2'"),
    ({}, "#WATTBATCH dry-run=yes\n", "script line 2: --wb-dry-run takes no value (got 'yes')"),
])
def test_an_unreadable_dry_run_value_is_an_error_and_submits_nothing(fake, env, script_line, named):
    (fake / "job.sh").write_text("#!/bin/sh\n" + script_line + "true\n")
    rc, out, err, sent, _ = _run(fake, ["-J", "x", "job.sh"], env=env)
    assert (rc, out, sent) == (255, "", None)
    assert err == (f"wattbatch: error: {named}" + err.partition(named)[2]) and err.count("\n") == 1
    assert "it may ask for a dry run, so nothing was submitted (fix or remove it)" in err


def test_a_decision_that_falls_back_in_a_dry_run_says_it_would_submit_unchanged(fake):
    rc, out, _, sent, _ = _run(fake, ["--wb-dry-run", "--wb-policy", "test-broken", "job.sh"])
    assert (rc, sent) == (0, None)
    assert out.startswith("# wattbatch: would submit unchanged: policy exploded")


TIME_FORMS = ("give minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED/INFINITE "
              "(e.g. --time=90 or --time=1-12:00:00)")


@pytest.mark.parametrize("argv, env, script_line, dry, where", [
    (["--wb-dry-run", "-t", "bogus"], {}, "", "command line", "command line"),
    (["--wb-json"], {}, "#SBATCH -t bogus\n", "command line", "script line 2"),
    ([], {"WATTBATCH_DRY_RUN": "1", "SBATCH_TIMELIMIT": "bogus"}, "", "$WATTBATCH_DRY_RUN",
     "$SBATCH_TIMELIMIT"),
    (["-t", "bogus"], {}, "#WATTBATCH dry-run\n", "script line 2", "command line"),
])
def test_a_bad_time_limit_stops_a_dry_run_naming_the_option_and_the_forms(
        fake, argv, env, script_line, dry, where):
    (fake / "job.sh").write_text("#!/bin/sh\n" + script_line + "true\n")
    rc, out, err, sent, _ = _run(fake, [*argv, "job.sh"], env=env)
    assert (rc, out, sent) == (255, "", None)
    assert err == (f"wattbatch: error: dry run ({dry}): {where}: --time='bogus': not a time "
                   f"limit sbatch takes; {TIME_FORMS}; nothing submitted (fix that value)\n")


def test_a_bad_time_limit_outside_a_dry_run_is_left_to_sbatch(fake):
    rc, out, err, sent, _ = _run(fake, ["-t", "bogus", "job.sh"])
    assert (rc, out, err, sent) == (0, "Submitted batch job 77\n", "", ["-t", "bogus", "job.sh"])


NAMES = ", ".join(registry.policy_names())


@pytest.mark.parametrize("env, site, script_line, named", [
    ({"WATTBATCH_POLICY": "nosuch"}, "", "",
     f"$WATTBATCH_POLICY: --wb-policy='nosuch': unknown policy; set $WATTBATCH_POLICY to one "
     f"of: {NAMES}, or unset it"),
    ({}, "", "#WATTBATCH policy=nosuch\n",
     f"script line 2: --wb-policy='nosuch': unknown policy; change that #WATTBATCH policy= "
     f"setting to one of: {NAMES}, or remove it"),
    ({}, '[policy]\nname = "nosuch"\nfail_open = false\n', "",
     f"config: {{site}}: policy.name = 'nosuch': unknown policy; set policy.name in {{site}} to "
     f"one of: {NAMES}"),
    ({"WATTBATCH_POLICY_NAME": "nosuch"}, "", "",
     f"config: $WATTBATCH_POLICY_NAME: policy.name = 'nosuch': unknown policy; set "
     f"$WATTBATCH_POLICY_NAME to one of: {NAMES}, or unset it"),
])
def test_an_unknown_policy_names_where_it_was_set_the_known_ones_and_the_fix(
        fake, env, site, script_line, named):
    with open(fake / "site.toml", "a") as fh:
        fh.write(site)
    (fake / "job.sh").write_text("#!/bin/sh\n" + script_line + "true\n")
    rc, out, err, sent, _ = _run(fake, ["-J", "x", "job.sh"], env=env)
    assert (rc, out, sent) == (0, "Submitted batch job 77\n", ["-J", "x", "job.sh"])
    named = named.format(site=fake / "site.toml")
    assert err == f"wattbatch: warning: {named}; submitting the job unchanged\n"
    assert "eaco" in NAMES and "test-share" in NAMES


def test_an_unknown_policy_on_the_command_line_says_how_to_fix_it(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-policy=nosuch", "job.sh"])
    assert (rc, out, sent) == (255, "", None)
    assert err == (f"wattbatch: command line: --wb-policy='nosuch': unknown policy; choose one "
                   f"of: {NAMES} (or several joined by +), or leave --wb-policy out for the site's policy\n")


@pytest.mark.parametrize("argv, env, script_line, named", [
    (["--bogus"], {}, "#WATTBATCH dry-run\n", "dry run (script line 2): sbatch would reject "
     "the command line: unrecognized option '--bogus'"),
    (["--parsable=1"], {}, "#WATTBATCH app=x json\n", "dry run (script line 2): sbatch would "
     "reject the command line: option '--parsable' doesn't allow an argument"),
    (["--bogus", "--wb-dry-run"], {}, "", "dry run (command line): sbatch would reject the "
     "command line: unrecognized option '--bogus'"),
    (["--bogus"], {"WATTBATCH_JSON": "1"}, "", "dry run ($WATTBATCH_JSON): sbatch would reject "
     "the command line: unrecognized option '--bogus'"),
    (["--bogus"], {}, "#WATTBATCH dry-run=yes\n", "script line 2: --wb-dry-run takes no value"),
])
def test_a_dry_run_asked_for_in_the_script_never_hands_sbatch_a_bad_command_line(
        fake, argv, env, script_line, named):
    (fake / "job.sh").write_text("#!/bin/sh\n" + script_line + "true\n")
    rc, out, err, sent, _ = _run(fake, [*argv, "job.sh"], env=env)
    assert (rc, out, sent) == (255, "", None)
    assert err.startswith(f"wattbatch: error: {named}") and err.count("\n") == 1, err
    assert "nothing submitted" in err or "nothing was submitted" in err


def test_a_dry_run_asked_for_in_a_heterogeneous_jobs_script_submits_nothing(fake):
    """wattbatch leaves heterogeneous jobs to sbatch, but not when the script asks for a dry
    run: it prints the job as sbatch would get it, unchanged."""
    (fake / "job.sh").write_text("#!/bin/sh\n#WATTBATCH dry-run\ntrue\n")
    rc, out, err, sent, _ = _run(fake, ["-n1", ":", "-n2", "job.sh"])
    assert (rc, sent) == (0, None), err
    assert "heterogeneous job" in out + err and "#WATTBATCH dry-run" in out


def test_a_bad_command_line_without_a_dry_run_is_still_sbatchs_to_report(fake):
    (fake / "job.sh").write_text("#!/bin/sh\n#WATTBATCH dry-run\ntrue\n")
    rc, out, err, sent, _ = _run(fake, ["--bogus", "job.sh"], env={"WATTBATCH_OFF": "1"})
    assert (rc, out, err, sent) == (255, "", "sbatch: unrecognized option '--bogus'\n",
                                    ["--bogus", "job.sh"])
    (fake / "job.sh").write_text(SCRIPT)
    rc, _, err, sent, _ = _run(fake, ["--bogus", "--wb-explain", "job.sh"])
    assert (rc, err, sent) == (255, "sbatch: unrecognized option '--bogus'\n",
                               ["--bogus", "job.sh"])
    # standard input is read only when sbatch would read it: not for a command line it rejects
    rc, _, err, sent, _ = _run(fake, ["--bogus"], stdin=b"#!/bin/sh\n#WATTBATCH dry-run\n")
    assert (rc, sent) == (255, ["--bogus"])


# --- GPUs asked with --gpus*, --wb-policy, --wb-deadline ---------------------------------------

def test_gpus_beside_gres_gpu_keep_the_whole_gpu_and_say_so(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-policy=test-share", "--wb-explain", "-G", "1",
                                        "job.sh"])
    assert rc == 0 and sent == ["-G", "1", "--nodelist=gpu1",
                                "--comment=wb:policy=test-share;app=bert", "job.sh"]
    assert "GPU change dropped: GPUs asked with --gpus" in err
    assert "explain: advised (its GPU choice not applied, see below): share gpu 1" in err
    (fake / "argv").unlink()
    (fake / "job.sh").write_text(SCRIPT.replace("-J train", "-J train --gpus-per-node=1"))
    rc, out, _, sent, _ = _run(fake, ["--wb-json", "--wb-policy=test-share", "job.sh"])
    doc = json.loads(out)
    assert rc == 0 and sent is None and "--gres=shard:g1:2" not in doc["sbatch_args_added"]
    assert "WATTBATCH_SHARE_MODE" not in doc["environment"] and doc["template"] == ""
    assert doc["why"] == ["advised (its GPU choice not applied, see below): share gpu 1 of gpu1"]


def test_an_unknown_policy_on_the_command_line_exits_255_and_submits_nothing(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-policy=nosuch", "job.sh"])
    assert (rc, out, sent) == (255, "", None) and err.count("\n") == 1
    assert err.startswith("wattbatch: command line: --wb-policy='nosuch': unknown policy; "
                          "choose one of: ") and "eaco" in err and "test-share" in err
    rc, out, err, sent, _ = _run(fake, ["--wb-dry-run", "--wb-policy=nosuch", "job.sh"])
    assert (rc, out, sent) == (255, "", None)


def test_a_deadline_that_leaves_no_slack_is_one_warning_and_the_job_goes_in(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-deadline=now+10minutes", "-t", "60", "job.sh"])
    assert rc == 0 and out == "Submitted batch job 77\n" and "slack=" not in " ".join(sent)
    assert err.count("\n") == 1 and err.startswith(
        "wattbatch: warning: command line: --wb-deadline='now+10minutes': only 10 min away")
    rc, _, err, _, _ = _run(fake, ["--wb-deadline=now+3hours", "-t", "60", "job.sh"])
    assert rc == 0 and err == ""


def test_an_unknown_workload_class_is_one_warning_and_the_job_goes_in(fake):
    rc, out, err, sent, _ = _run(fake, ["--wb-app=resnet50", "job.sh"])
    assert rc == 0 and out == "Submitted batch job 77\n" and sent is not None
    assert err.count("\n") == 1 and err.startswith(
        "wattbatch: warning: command line: --wb-app='resnet50': not a known workload class")
    assert "resnet18" in err and "vgg16" in err
    for known in ("ResNet18", "cifar10"):    # any case; a Pollux scaling profile's too
        rc, _, err, _, _ = _run(fake, [f"--wb-app={known}", "job.sh"])
        assert rc == 0 and err == ""
