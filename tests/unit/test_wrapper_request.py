"""Slurm time formats, GPU requests, merging of layers, wattbatch's own options."""

from __future__ import annotations

import time

import pytest

from wrapper.request import (build_request, requested_model, deadline_warning, gpu_ask, gpus_option, merge,
                             parse_gres, parse_instant_s, parse_time_limit_s)
from wrapper.sbatch_args import parse_command_line, parse_script
from wrapper.wb_options import WbOptionError, WbSettings, dry_run_wanted, resolve, takes_value


@pytest.mark.parametrize("text,seconds", [
    ("5", 300), ("5:30", 330), ("1:02:03", 3723), ("2-0", 172800), ("1-2", 93600),
    ("1-2:03", 93780), ("1-2:03:04", 93784), ("UNLIMITED", None), ("infinite", None),
    ("0", None)])
def test_time_limit_formats(text, seconds):
    assert parse_time_limit_s(text) == seconds


@pytest.mark.parametrize("bad", ["", "x", "1:2:3:4", "1-2:3:4:5", "-5", "+5", "5_0", "1-"])
def test_time_limit_rejects(bad):
    with pytest.raises(ValueError):
        parse_time_limit_s(bad)


def test_a_bad_time_limit_names_the_option_the_value_and_the_forms_sbatch_takes():
    with pytest.raises(ValueError) as exc:
        parse_time_limit_s("bogus")
    assert str(exc.value) == (
        "--time='bogus': not a time limit sbatch takes; give minutes, MM:SS, HH:MM:SS, D-HH, "
        "D-HH:MM, D-HH:MM:SS or UNLIMITED/INFINITE (e.g. --time=90 or --time=1-12:00:00)")
    for argv, env, where in ((["-t", "bogus"], {}, "command line"),
                             ([], {"SBATCH_TIMELIMIT": "1:x"}, "$SBATCH_TIMELIMIT")):
        with pytest.raises(ValueError, match=r"^(.*): --time='(bogus|1:x)': not a time limit "
                           r"sbatch takes; give minutes, MM:SS, .* or UNLIMITED/INFINITE") as exc:
            build_request(_view(argv, env=env), WbSettings(), script=None, now_s=0, environ={})
        assert str(exc.value).startswith(where + ": ") and "invalid literal" not in str(exc.value)
    script = "#!/bin/sh\n#SBATCH --time=1-2:3:4:5\ntrue\n"
    with pytest.raises(ValueError, match=r"^script line 2: --time='1-2:3:4:5': not a time"):
        build_request(_view([], script), WbSettings(), script="t.sh", now_s=0, environ={})
    for argv, named in ((["--deadline=someday"], "command line: --deadline='someday': not a time "
                         "sbatch takes"),
                        (["--gpus=abc"], "command line: --gpus='abc': not a GPU count sbatch "
                         "takes; give [TYPE:]N")):
        with pytest.raises(ValueError) as exc:
            build_request(_view(argv), WbSettings(), script=None, now_s=0, environ={})
        assert str(exc.value).startswith(named)


def test_instants():
    now = time.mktime((2024, 3, 10, 14, 0, 0, 0, 0, -1))
    assert parse_instant_s("now", now) == now
    assert parse_instant_s("now+90", now) == now + 90
    assert parse_instant_s("now+2hours", now) == now + 7200
    assert parse_instant_s("2024-03-11T08:30", now) == time.mktime((2024, 3, 11, 8, 30, 0, 0, 0, -1))
    assert parse_instant_s("2024-03-11", now) == time.mktime((2024, 3, 11, 0, 0, 0, 0, 0, -1))
    assert parse_instant_s("16:00", now) == now + 7200
    assert parse_instant_s("13:00", now) == now + 23 * 3600          # passed: tomorrow
    assert parse_instant_s("teatime", now) == now + 7200
    assert parse_instant_s("tomorrow", now) == time.mktime((2024, 3, 11, 0, 0, 0, 0, 0, -1))
    assert parse_instant_s("031224", now) == time.mktime((2024, 3, 12, 0, 0, 0, 0, 0, -1))
    with pytest.raises(ValueError):
        parse_instant_s("someday", now)


def _view(argv, script="#!/bin/sh\ntrue\n", env=None):
    cl = parse_command_line(argv, takes_value)
    return merge(cl.uses, parse_script(script).uses, env or {})


def test_gpu_requests():
    assert gpu_ask(_view(["--gres=gpu:v100:2,nvme:1"]), 1).gpus == 2
    assert gpu_ask(_view(["--gres=gpu:v100:2"]), 1).model == "v100"
    assert gpu_ask(_view(["--gres=gres:gpu"]), 1).gpus == 1
    assert gpu_ask(_view(["--gpus-per-node=a100:4"]), 1).gpus == 4
    assert gpu_ask(_view(["-G", "6", "-N", "2"]), 2).gpus == 3
    assert gpu_ask(_view(["--gres=shard:2"]), 1).shared
    assert gpu_ask(_view([]), 1).gpus == 0
    assert [e.text for e in parse_gres("gpu:2,nvme:1")] == ["gpu:2", "nvme:1"]
    tres = gpu_ask(_view(["--tres-per-task=cpu:2,gres/gpu:a100:1"]), 1)
    assert (tres.gpus, tres.model, tres.source) == (1, "a100", "tres-per-task")


def test_gpus_options_are_seen_beside_gres_from_any_layer():
    assert gpus_option(_view(["--gres=gpu:1", "-G", "1"])) == "gpus"
    assert gpus_option(_view(["--gres=gpu:1"], "#!/bin/sh\n#SBATCH --gpus-per-node=1\ntrue\n")) \
        == "gpus-per-node"
    env = {"SBATCH_GPUS_PER_TASK": "1"}
    assert gpus_option(_view(["--gres=gpu:1"], env=env)) == "gpus-per-task"
    assert gpus_option(_view(["--tres-per-task=gres/gpu:1"])) == "tres-per-task"
    assert gpus_option(_view(["--tres-per-task=cpu:2", "--gres=gpu:1"])) == ""


def test_command_line_beats_env_beats_script():
    script = "#!/bin/sh\n#SBATCH -J fromscript -t 10 -p s\ntrue\n"
    view = _view(["-t", "20"], script, {"SBATCH_JOB_NAME": "fromenv"})
    assert view.get("time") == "20" and view.get("job_name") == "fromenv"
    assert view.get("partition") == "s" and view.sources["partition"] == "script line 2"


def test_build_request():
    wb = WbSettings(app="bert", share=True, elastic=(1, 4), opt_out=frozenset({"defer"}))
    req = build_request(_view(["-N2", "--gres=gpu:2", "-t", "1:00:00", "--deadline=now+1hour"]),
                        wb, script="dir/train.sh", now_s=1000.0, environ={})
    assert (req.name, req.gpus, req.num_nodes, req.time_limit_s, req.deadline_s) == (
        "train.sh", 2, 2, 3600.0, 4600.0)
    assert (req.app, req.allow_share, req.min_gpus, req.max_gpus) == ("bert", True, 1, 4)
    assert req.opt_out == {"defer"} and req.repeat_key.endswith(":train.sh:bert")
    assert (req.account, req.partition) == ("", "")
    # the account and partition reach the policy (GreenFlow's per-account budgets and
    # shiftable partitions), from the command line, the environment or the script
    view = _view(["-A", "physics"], "#!/bin/sh\n#SBATCH -p long,short\ntrue\n")
    req = build_request(view, wb, script="t.sh", now_s=0, environ={})
    assert (req.account, req.partition) == ("physics", "long,short")
    req = build_request(_view([], env={"SBATCH_ACCOUNT": "bio"}), wb, script="t.sh", now_s=0,
                        environ={})
    assert req.account == "bio"
    wrap = build_request(_view(["--wrap=x"]), WbSettings(), script=None, now_s=0, environ={})
    assert wrap.name == "wrap"


@pytest.mark.parametrize("words,slack_s", [
    (["--wb-slack=6h"], 21600.0), (["--wb-slack", "90m"], 5400.0), (["--wb-slack=2d"], 172800.0),
    (["--wb-slack=600"], 600.0), (["--wb-deadline=now+3hours"], 3 * 3600.0 - 3600.0),
    (["--wb-deadline=now+3hours", "--wb-slack=1h"], 3600.0),
    (["--wb-deadline=now+30minutes"], None), ([], None)])
def test_slack_from_wb_slack_or_the_room_a_deadline_leaves(words, slack_s):
    wb = resolve(parse_command_line(words, takes_value).wb_words, [], {})
    req = build_request(_view(["-t", "60"]), wb, script=None, now_s=1000.0, environ={})
    assert (req.slack_s or None) == slack_s


def test_a_deadline_that_leaves_no_slack_is_said_once():
    now = time.mktime((2026, 3, 10, 14, 0, 0, 0, 0, -1))
    past = deadline_warning(WbSettings(deadline="2020-01-01T00:00",
                                       sources={"deadline": "$WATTBATCH_DEADLINE"}), 3600.0, now)
    assert past == ("$WATTBATCH_DEADLINE: --wb-deadline='2020-01-01T00:00': that time has passed; "
                    "the job gets no slack (it is placed as if no deadline were given); "
                    "give a later deadline")
    close = deadline_warning(WbSettings(deadline="now+10minutes"), 3600.0, now)
    assert close.startswith("command line: --wb-deadline='now+10minutes': only 10 min away, "
                            "within the job's time limit (1 h 0 min): it cannot be met")
    assert close.endswith("give a later deadline or a shorter --time")
    assert deadline_warning(WbSettings(deadline="now+2hours"), 3600.0, now) == ""
    assert deadline_warning(WbSettings(deadline="now+2hours"), None, now) == ""
    assert deadline_warning(WbSettings(), 3600.0, now) == ""


def test_a_dry_run_is_found_in_any_layer_whatever_else_is_bad():
    assert dry_run_wanted([("dry-run", None)], [], {}) == ("command line", False)
    assert dry_run_wanted([("slack", "6x")], [(3, " slack=6x dry-run")], {}) == ("script line 3",
                                                                                 False)
    assert dry_run_wanted([], [(2, " app='x dry-run")], {}) == ("script line 2", False)
    assert dry_run_wanted([], [], {"WATTBATCH_JSON": "yes", "WATTBATCH_BATCH_SIZE": "0-100"}) == (
        "$WATTBATCH_JSON", True)
    assert dry_run_wanted([], [], {"WATTBATCH_DRY_RUN": "0"}) == ("", False)
    with pytest.raises(WbOptionError, match=r"\$WATTBATCH_DRY_RUN='maybe': expected 1/0"):
        dry_run_wanted([], [], {"WATTBATCH_DRY_RUN": "maybe"})
    with pytest.raises(WbOptionError, match=r"line 4: --wb-dry-run takes no value \(got 'yes'\)"):
        dry_run_wanted([], [(4, " dry-run=yes")], {})


@pytest.mark.parametrize("words", [["--wb-slack=soon"], ["--wb-slack=-1h"], ["--wb-slack=0"],
                                   ["--wb-deadline=someday"]])
def test_bad_slack_or_deadline_is_a_clear_error(words):
    with pytest.raises(WbOptionError, match="(slack|deadline)"):
        resolve(parse_command_line(words, takes_value).wb_words, [], {})


def test_wb_layers_and_errors():
    wb = resolve([("app", "cli")], [(3, " app=script no-share opt-out=defer,resize")],
                 {"WATTBATCH_APP": "env", "WATTBATCH_DRY_RUN": "1", "WATTBATCH_SHARE": "1"})
    assert (wb.app, wb.share, wb.dry_run) == ("cli", False, True)
    assert wb.opt_out == {"defer", "resize"} and wb.sources["app"] == "command line"
    assert resolve([("json", None)], [], {}).dry_run
    assert resolve([], [(2, " --wb-policy eaco # why")], {}).policy == "eaco"
    assert resolve([("opt-out", "all")], [], {}).opt_out == {"share", "defer", "resize", "place",
                                                              "power", "batch"}
    with pytest.raises(WbOptionError, match="unknown option --wb-bogus; valid options: --wb-dry-run"):
        resolve([("bogus", None)], [], {})
    with pytest.raises(WbOptionError, match="script line 4: malformed"):
        resolve([], [(4, ' app="x')], {})
    with pytest.raises(WbOptionError, match="script line 5: --wb-elastic='4-1'"):
        resolve([], [(5, " elastic=4-1")], {})
    with pytest.raises(WbOptionError, match="takes no value"):
        resolve([("dry-run", "yes")], [], {})
    with pytest.raises(WbOptionError, match="WATTBATCH_EXPLAIN"):
        resolve([], [], {"WATTBATCH_EXPLAIN": "maybe"})


def test_contradicting_flags_in_one_layer_are_an_error_and_a_later_layer_still_overrides():
    with pytest.raises(WbOptionError, match="command line: --wb-share and --wb-no-share "
                                            "contradict each other"):
        resolve([("share", None), ("no-share", None)], [], {})
    with pytest.raises(WbOptionError, match="#WATTBATCH lines: --wb-no-share and --wb-share"):
        resolve([], [(3, " no-share"), (4, " share")], {})
    wb = resolve([("share", None)], [(3, " no-share")], {"WATTBATCH_SHARE": "0"})
    assert wb.share is True and wb.sources["share"] == "command line"
    assert resolve([("share", None), ("share", None)], [], {}).share is True


@pytest.mark.parametrize("gres_type, constraint, model", [
    ("a100", "", "A100-SXM4-80GB"),                    # a short alias names one part
    ("h100_80gb_hbm3_g0", "", "H100-80GB-HBM3"),       # <model>_gN, as the local cluster
    ("nvidia_h100_80gb_hbm3", "", "H100-80GB-HBM3"),   # AutoDetect=nvml's name
    ("g0", "h100", "g0"),                              # a type without a model wins as given
    ("tesla", "", "tesla"),
    ("", "h100", "H100-80GB-HBM3"), ("", "ib&v100", "V100-SXM2-32GB"),
    ("", "ib", ""), ("", "h100|a100", ""), ("", "[h100*2]", ""), ("", "", ""),
])
def test_the_model_a_job_asks_for(gres_type, constraint, model):
    assert requested_model(gres_type, constraint) == model


def test_a_typed_request_keeps_its_type_and_names_its_model():
    req = build_request(_view(["--gres=gpu:a100:2"]), WbSettings(), script=None, now_s=0,
                        environ={})
    assert (req.gpu_type, req.gpu_model, req.gpus) == ("a100", "A100-SXM4-80GB", 2)
    req = build_request(_view(["--gres=gpu:1"], "#!/bin/sh\n#SBATCH -C h100\n"), WbSettings(),
                        script=None, now_s=0, environ={})
    assert (req.gpu_type, req.gpu_model) == ("", "H100-80GB-HBM3")
