"""Philly rows: the quick reading of well-formed rows agrees with the checked one."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.sim.trace import _philly_row, _Row, _time_s, read_trace

ROWS = [("2017-10-03 12:00:00", "600", "1"), (" 2017-10-03 12:00:05 ", " 7.5 ", " 8 "),
        ("2017-10-03 12:00:05", "1e3", "2"), ("2017-10-03T12:00:09", "60", "4"),
        ("2017-10-03 12:00:10+02:00", "60", "1"), ("2017-10-03 12:00:11", "60", "4.0"),
        ("2017-10-03 12:00:12", "0", "1"), ("2017-10-03 12:00:13", "nan", "1"),
        ("2017-10-03 12:00:14", "60", "0"), ("2017-10-03 12:00:15", "inf", "1"),
        ("bad", "60", "1"), ("2017-10-03 12:00:16", "x", "1")]


def _checked(rec: dict[str, str], line: int):
    row = _Row("t.csv", line, rec)
    return (_time_s(row, "timestamp"), row.num("duration", minimum=0),
            row.num("num_gpus", int, minimum=1))


@pytest.mark.parametrize("stamp,duration,gpus", ROWS)
def test_quick_reading_is_the_checked_one_or_leaves_the_row_to_it(stamp, duration, gpus):
    rec = {"timestamp": stamp, "duration": duration, "num_gpus": gpus}
    quick = _philly_row(rec, 1, 2)
    try:
        checked = _checked(rec, 2)
    except InputError:
        assert quick is None
        return
    if quick is not None:
        assert (quick.submit_s, quick.duration_s, quick.num_gpus) == checked
        assert checked[1] > 0 and type(quick.num_gpus) is int
    else:   # left to the checks: a zone, a whole number written 4.0, or no positive duration
        assert "+" in stamp or "." in gpus or not checked[1] > 0


def test_a_trace_mixing_both_kinds_of_rows_reads_in_file_order(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-03 12:00:00,600,1,600,a\n2017-10-03 12:00:00,60,4.0,240,a\n"
                 "2017-10-03 11:00:00,5,2,10,b\n")
    jobs = read_trace(p, "philly")
    assert [(j.job_id, j.line, j.num_gpus) for j in jobs] == [("3", 4, 2), ("1", 2, 1),
                                                              ("2", 3, 4)]


def test_a_byte_order_mark_and_crlf_do_not_hide_the_first_column(tmp_path):
    """Excel and PowerShell write a BOM: before, the first column read as '\ufefftimestamp'."""
    text = ("timestamp,duration,num_gpus,gpu_time,cluster\r\n"
            "2017-10-03 12:00:00,600,1,600,a\r\n2017-10-03 11:00:00,5,2,10,b\r\n")
    plain, bom = tmp_path / "t.csv", tmp_path / "bom.csv"
    plain.write_text(text, newline="")
    bom.write_text(text, encoding="utf-8-sig", newline="")
    assert read_trace(bom, "philly") == read_trace(plain, "philly")
    assert read_trace(bom, "philly").warnings == ()


def test_a_row_cut_short_says_so(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-03 12:00:00,600,1,600,a\n2017-10-03 12:00:05,60\n")
    with pytest.raises(InputError, match=r"line 3: field num_gpus: the row is cut short "
                                         r"\(2 fields, the header has 5\); complete the line"):
        read_trace(p, "philly")
    # the optional columns may be left off a row
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 12:00:00,600,1\n")
    assert read_trace(p, "philly")[0].num_gpus == 1


@pytest.mark.parametrize("header,fmt,other", [
    ("name,time,application,num_replicas,batch_size", "philly", "pollux"),
    ("timestamp,duration,num_gpus,gpu_time,cluster", "pollux", "philly"),
    ("job_id,submit_s,duration_s,num_gpus", "philly", "canonical"),
])
def test_a_header_of_another_format_suggests_it(tmp_path, header, fmt, other):
    p = tmp_path / "t.csv"
    p.write_text(header + "\n")
    with pytest.raises(InputError, match=rf"line 1: field \w+: missing column .*; the header is "
                                         rf"a {other} trace's: did you mean --trace-format "
                                         rf"{other}\?"):
        read_trace(p, fmt)
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError) as exc:
        read_trace(p, fmt)
    assert "did you mean" not in str(exc.value)
