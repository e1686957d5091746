"""sbatch's command line and #SBATCH rules, as checked against sbatch 22.05.8 (options: also
24.11.5 and 26.05.5)."""

from __future__ import annotations

import pytest

from wrapper.options import BY_NAME, OPTIONS, OptionLookupError, lookup_long, lookup_short
from wrapper.sbatch_args import SbatchSyntaxError, parse_command_line, parse_script, split_directive
from wrapper.wb_options import takes_value


def _cl(*argv: str):
    return parse_command_line(list(argv), takes_value)


def _vals(uses):
    return [(u.opt.name, u.value) for u in uses]


# What each release's sbatch binary (22.05.8, 24.11.5, 26.05.5) says of its long options:
# names from "sbatch --<letter>" (ambiguous; possibilities), kinds from "--NAME=x" / "--NAME"
# (NAME- takes no value, NAME? an optional one, NAME a required one). The short letters are the
# same in the three: these take a value; the others ("-H", "-k", ...) do not, or only attached.
RELEASES = {
    "22.05": """
        account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters
        comment constraint container context contiguous- core-spec cores-per-socket cpu-freq
        cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution error exclude
        exclusive? export export-file extra-node-info get-user-env? gid gpu-bind gpu-freq gpus
        gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help- hint hold- ignore-pbs-
        input job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind
        mem-per-cpu mem-per-gpu mincpus network nice? no-kill? no-requeue- nodefile nodelist nodes
        ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres
        open-mode output overcommit- oversubscribe- parsable- partition power prefer priority
        profile propagate? qos quiet- reboot- requeue- reservation signal sockets-per-node
        spread-job- switches tasks-per-node test-only- thread-spec threads-per-core time time-min
        tmp uid usage- use-min-nodes- verbose- version- wait- wait-all-nodes wckey wrap
    """,
    "24.11": """
        account acctg-freq array autocomplete batch bb bbf begin chdir cluster cluster-constraint
        clusters comment constraint container container-id context contiguous- core-spec
        cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
        distribution error exclude exclusive? export export-file extra extra-node-info
        get-user-env? gid gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres
        gres-flags help- hint hold- ignore-pbs- input job-name kill-on-invalid-dep licenses
        mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice?
        no-kill? no-requeue- nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu
        ntasks-per-node ntasks-per-socket ntasks-per-tres oom-kill-step? open-mode output
        overcommit- oversubscribe- parsable- partition prefer priority profile propagate? qos
        quiet- reboot- requeue- reservation resv-ports? segment signal sockets-per-node
        spread-job- stepmgr- switches tasks-per-node test-only- thread-spec threads-per-core time
        time-min tmp tres-bind tres-per-task uid usage- use-min-nodes- verbose- version- wait-
        wait-all-nodes wckey wrap
    """,
    "26.05": """
        account acctg-freq array autocomplete batch bb bbf begin chdir cluster cluster-constraint
        clusters comment consolidate-segments- constraint container container-id container-type
        context contiguous- core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task
        deadline delay-boot dependency distribution error exclude exclusive? export export-file
        external- extra extra-node-info get-user-env- gid gpu-bind gpu-freq gpus gpus-per-node
        gpus-per-socket gpus-per-task gres gres-flags help- hint hold- ignore-pbs- input job-name
        kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu
        mem-per-gpu mem-update mincpus network nice? no-kill? no-requeue- nodefile nodelist nodes
        ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres
        oom-kill-step? open-mode output overcommit- oversubscribe- parsable- partition prefer
        priority profile propagate? qos quiet- reboot- requeue? reservation resources resv-ports?
        segment signal sockets-per-node spread-job- spread-segments- stepmgr- switches
        tasks-per-node test-only- thread-spec threads-per-core time time-min tmp tres-bind
        tres-per-task uid usage- use-min-nodes- verbose- version- wait- wait-all-nodes wckey wrap
    """,
}
SHORT_REQUIRED = "ABCDFGJLMNSabcdeimnopqtwx"
SHORT_OTHER = "HOQVWhksv"
KIND = {"-": "none", "?": "optional"}


def _release(text):
    return {w.rstrip("-?"): KIND.get(w[-1], "required") for w in text.split()}


def test_table_has_every_sbatch_option_once():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)) == 121
    shorts = [o.short for o in OPTIONS if o.short]
    assert len(shorts) == len(set(shorts)) == 34
    assert BY_NAME["exclusive"].arg == BY_NAME["nice"].arg == BY_NAME["no-kill"].arg == "optional"
    assert BY_NAME["stepmgr"].arg == BY_NAME["parsable"].arg == "none"
    assert BY_NAME["tasks-per-node"].canonical == "ntasks-per-node"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_table_knows_every_option_of_each_release_and_how_it_takes_a_value(release):
    options = _release(RELEASES[release])
    assert sorted(set(options) - set(BY_NAME)) == []
    for name, kind in options.items():
        # a release that takes a value the others do not: "optional" splits argv the same way
        assert BY_NAME[name].arg in (kind, "optional"), (release, name)
    assert "".join(sorted(o.short for o in OPTIONS if o.short and o.arg == "required")) == \
        "".join(sorted(SHORT_REQUIRED))
    assert {o.short for o in OPTIONS if o.short and o.arg != "required"} == set(SHORT_OTHER)


def test_table_is_the_union_of_the_releases():
    union = set().union(*(_release(text) for text in RELEASES.values()))
    assert union == set(BY_NAME)


@pytest.mark.parametrize("argv, expected", [
    (["--tres-per-task=gres/gpu:1"], [("tres-per-task", "gres/gpu:1")]),
    (["--segment", "2", "--stepmgr"], [("segment", "2"), ("stepmgr", None)]),
    (["--oom-kill-step", "--resv-ports=3"], [("oom-kill-step", None), ("resv-ports", "3")]),
    (["--requeue=expedite", "--tres-bind", "gres/gpu:single:1"],
     [("requeue", "expedite"), ("tres-bind", "gres/gpu:single:1")]),
    (["--container-id=c1", "--spread-segments", "--mem-update=x"],
     [("container-id", "c1"), ("spread-segments", None), ("mem-update", "x")]),
])
def test_options_of_24_11_and_26_05_are_read(argv, expected):
    cl = _cl(*argv, "job.sh")
    assert not cl.error and _vals(cl.uses) == expected and cl.script == "job.sh"


def test_long_prefix_and_ambiguity_like_getopt():
    assert lookup_long("part").name == "partition"
    assert lookup_long("time").name == "time"          # exact beats prefix of time-min
    with pytest.raises(OptionLookupError, match="ambiguous"):
        lookup_long("tim")
    with pytest.raises(OptionLookupError, match="unrecognized"):
        lookup_long("bogus")
    with pytest.raises(OptionLookupError, match="invalid option"):
        lookup_short("y")


def test_value_forms_and_script_boundary():
    cl = _cl("--time=5", "--partition", "gpu", "-J", "n", "-tX", "-Hv", "--exclusive",
             "--nice=3", "-koff", "job.sh", "--time=9", "-J", "arg")
    assert _vals(cl.uses) == [("time", "5"), ("partition", "gpu"), ("job-name", "n"),
                              ("time", "X"), ("hold", None), ("verbose", None),
                              ("exclusive", None), ("nice", "3"), ("no-kill", "off")]
    assert cl.script == "job.sh" and cl.script_args == ["--time=9", "-J", "arg"]
    assert cl.opt_end == 10


def test_optional_value_is_never_the_next_word():
    cl = _cl("--exclusive", "user", "x")
    assert _vals(cl.uses) == [("exclusive", None)] and cl.script == "user"


def test_wattbatch_words_are_taken_out_before_the_script_only():
    cl = _cl("--wb-dry-run", "-p", "gpu", "--wb-app", "bert", "s.sh", "--wb-explain")
    assert cl.wb_words == [("dry-run", None), ("app", "bert")]
    assert cl.option_words == ["-p", "gpu"] and cl.script_args == ["--wb-explain"]
    assert cl.wb_indexes == {0, 3, 4}


def test_double_dash_hetjob_and_errors():
    cl = _cl("-p", "a", "--", "-weird.sh", "x")
    assert cl.double_dash and cl.script == "-weird.sh" and cl.script_args == ["x"]
    assert _cl("-n1", ":", "-n2", "s.sh").hetjob
    assert "requires an argument" in _cl("--time").error
    assert "doesn't allow" in _cl("--parsable=1", "s.sh").error
    assert _cl("--wrap=echo hi").script is None


def test_after_an_option_sbatch_rejects_the_script_and_wattbatch_words_are_still_found():
    cl = _cl("--bogus", "-p", "gpu", "--wb-dry-run", "--zzz=1", "s.sh", "a", "--wb-json")
    assert cl.error == "unrecognized option '--bogus'" and cl.uses == []
    assert cl.script == "s.sh" and cl.script_args == ["a", "--wb-json"]
    assert cl.wb_words == [("dry-run", None)] and cl.wb_indexes == {3}
    cl = _cl("-J", "x", "--parsable=1", "-t", "5", "s.sh")
    assert "doesn't allow" in cl.error and _vals(cl.uses) == [("job-name", "x")]
    assert cl.script == "s.sh"


def test_directive_words_like_sbatch():
    assert split_directive(' --job-name="a b" -t 5 # comment --comment=zzz') == [
        "--job-name=a b", "-t", "5"]
    assert split_directive(" --account=it's x'y") == ["--account=its xy"]
    assert split_directive(' --comment=a\\b"c d"\\') == ["--comment=abc d"]
    with pytest.raises(SbatchSyntaxError, match="Unmatched"):
        split_directive(' --comment="x')


def test_script_header_stops_at_first_command():
    text = ("#!/bin/bash\n#SBATCH --job-name=\"a b\" -t 5\n#SBATCH--comment=x\n"
            "  #SBATCH --partition=inner\n\n# note\n#WATTBATCH app=x\n#SBATCH -o out -Hs\n"
            "echo hi\n#SBATCH --qos=after\n#WATTBATCH no-share\n")
    h = parse_script(text)
    assert _vals(h.uses) == [("job-name", "a b"), ("time", "5"), ("comment", "x"),
                             ("output", "out"), ("hold", None), ("oversubscribe", None)]
    assert [u.line for u in h.uses] == [2, 2, 3, 8, 8, 8]
    assert h.wb_lines == [(7, " app=x")] and not h.error


def test_script_header_errors_are_left_to_sbatch():
    h = parse_script("#!/bin/sh\n#SBATCH --bogus\n#SBATCH -t 5\n#WATTBATCH dry-run\ntrue\n")
    assert h.error == "line 2: unrecognized option '--bogus'" and h.uses == []
    assert h.wb_lines == [(4, " dry-run")]      # still read below it: it may ask for a dry run
    assert "Invalid directive" in parse_script("#!/bin/sh\n#SBATCH foo\ntrue\n").error
    assert "line 2" in parse_script('#!/bin/sh\n#SBATCH --comment="x\ntrue\n').error
