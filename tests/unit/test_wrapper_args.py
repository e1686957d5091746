"""sbatch's command line and #SBATCH rules, as checked against sbatch 22.05.8."""

from __future__ import annotations

import pytest

from wrapper.options import BY_NAME, OPTIONS, OptionLookupError, lookup_long, lookup_short
from wrapper.sbatch_args import SbatchSyntaxError, parse_command_line, parse_script, split_directive
from wrapper.wb_options import takes_value


def _cl(*argv: str):
    return parse_command_line(list(argv), takes_value)


def _vals(uses):
    return [(u.opt.name, u.value) for u in uses]


def test_table_has_every_sbatch_option_once():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)) == 106
    shorts = [o.short for o in OPTIONS if o.short]
    assert len(shorts) == len(set(shorts)) == 34
    assert BY_NAME["exclusive"].arg == BY_NAME["nice"].arg == BY_NAME["no-kill"].arg == "optional"
    assert BY_NAME["requeue"].arg == BY_NAME["parsable"].arg == "none"
    assert BY_NAME["tasks-per-node"].canonical == "ntasks-per-node"


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
    assert "Invalid directive" in parse_script("#!/bin/sh\n#SBATCH foo\ntrue\n").error
    assert "line 2" in parse_script('#!/bin/sh\n#SBATCH --comment="x\ntrue\n').error
