"""Parity with sbatch: each case (parity_cases.py) runs the same command line, environment and
working directory through Slurm's own sbatch and through wattbatch installed as ``sbatch``
(contrib's shim first on PATH, no bin-dir setting), then compares exit code, stdout and stderr
(job ids and times normalised), the job's fields in ``scontrol show job -o``, its stored script
(``scontrol write batch_script``) and, for jobs that run, their output.

Documented differences, and only these, are allowed (each counted in the summary):
* wattbatch's ``wb:`` tag (added to the user's ``--comment``) in ``sbatch -v`` output and in
  26.05's ``SubmitLine`` (the command line as sbatch was given it); the job's Comment is the
  user's own, as job_submit.lua (the local cluster runs it) takes the tag out (without it the
  tag stays in Comment, also a documented difference);
* AdminComment: ``tagged=1;policy=..;share=..`` where job_submit.lua recorded that tag;
* ``--help``: wattbatch's options after sbatch's help; without a usable Slurm configuration,
  wattbatch's own help with exit 0 and a note on stderr;
* ``--version``: ``wattbatch VERSION`` after sbatch's line.

One cluster for all cases; held jobs' fields are read in one ``scontrol show job`` call.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from parity_cases import SUMMARY, Case, all_cases
from sbatch_shim import env_with_shim, make_shim

from slurm_plugin import __version__
from wrapper.wb_options import help_text

pytestmark = pytest.mark.cluster
VOLATILE = {"SubmitTime", "EligibleTime", "AccrueTime", "StartTime", "EndTime", "RunTime",
            "LastSchedEval", "SuspendTime", "SecsPreSuspend", "PreemptEligibleTime",
            "PreemptTime", "ResizeTime", "AllocNode:Sid"}
# a job that runs: its state, and what the scheduler that started it (main or backfill) shows
# (a backfilled job without a limit shows TimeLimit=365-00:00:00; 24.11's AllocTRES is (null)
# until it is allocated); the held cases compare these
VOLATILE_RUNNING = VOLATILE | {"JobState", "Reason", "NodeList", "BatchHost", "Priority",
                               "NumNodes", "NumCPUs", "TRES", "AllocTRES", "Restarts",
                               "ExitCode", "Scheduler", "TimeLimit"}
_KEY = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z0-9_:/]*)=")      # Slurm's keys are capitalised
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_TAG = re.compile(r"(^|\s)wb:policy=\S+$")
_DECLARED = re.compile(r";declared_app=[^;]*")


def plain_fields(plain, side, job: str) -> dict:
    """The fields of the job in the same place of sbatch's side as ``job`` in ``side``."""
    k = side.ids.index(job)
    return plain.fields.get(plain.ids[k], {}) if k < len(plain.ids) else {}


@dataclass
class Side:
    rc: int
    out: str
    err: str
    ids: list[str]
    fields: dict[str, dict[str, str]] = field(default_factory=dict)
    scripts: dict[str, bytes] = field(default_factory=dict)
    output: str = ""


def parse_show(text: str) -> dict[str, dict[str, str]]:
    """``scontrol show job -o`` lines -> job id -> fields (an array's first line only)."""
    jobs: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        keys = list(_KEY.finditer(line))
        row = {m.group(1): line[m.end():keys[k + 1].start() if k + 1 < len(keys) else None]
               .strip() for k, m in enumerate(keys)}
        job = row.get("ArrayJobId") or row.get("JobId")
        if job and job not in jobs:
            jobs[job] = row
    return jobs


def job_ids(out: str) -> list[str]:
    return re.findall(r"(?m)(?:^Submitted batch job |^)(\d+)(?:;\S*| on cluster \S+)?$", out)


def norm(text: str, ids: list[str]) -> str:
    for k, job in enumerate(sorted(ids, key=len, reverse=True)):
        # not inside a size: job 562 is not masked in mem=562.50G (step ids 562.0 still are)
        text = re.sub(rf"(?<!\d)(?<!pytest-){job}(?!\d|\.\d+[KMGTP])", f"JOB{k}", text)
    text = re.sub(r"\bJob \d+ to start", "Job N to start", text)
    return _TIME.sub("TIME", text)


def run_side(case: Case, cwd: Path, env: dict[str, str], anchor: str) -> Side:
    done = subprocess.run(["bash", "-c", case.cmd.format(anchor=anchor)], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    out, err = (done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))
    return Side(done.returncode, out, err, job_ids(out))


def read_jobs(sides: list[Side], ids: list[str]) -> None:
    """Fields of ``ids`` in one call, and each job's stored script."""
    if not ids:
        return
    shown = parse_show(subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True,
                                      timeout=60).stdout.decode("utf-8", "replace"))
    for side in sides:
        for job in list(side.ids):
            side.fields[job] = shown.get(job, {})
            first, _, last = side.fields[job].get("HetJobIdSet", "").partition("-")
            if last:            # a heterogeneous job's other components have their own ids
                side.ids += [str(i) for i in range(int(first) + 1, int(last) + 1)]
            side.scripts[job] = subprocess.run(
                ["scontrol", "write", "batch_script", job, "-"], capture_output=True,
                timeout=30).stdout


def wait_gone(ids: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while ids and time.monotonic() < deadline:
        left = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)],
                              capture_output=True, text=True).stdout.split()
        if not left:
            return
        time.sleep(0.3)


def comparable(side: Side, case: Case, plain: Side | None, kinds: set[str]) -> dict:
    """What is compared, normalised. On wattbatch's side (``plain`` given) the documented
    differences are taken out and their kinds added to ``kinds``."""
    out, err, rc = norm(side.out, side.ids), norm(side.err, side.ids), side.rc
    if plain is not None:
        out, err, rc = _documented(case, out, err, rc, plain, kinds)
    volatile = VOLATILE_RUNNING if case.runs else VOLATILE
    fields = []
    for job in side.ids:
        row = {k: norm(v, side.ids) for k, v in side.fields.get(job, {}).items()
               if k not in volatile}
        if plain is not None and "AdminComment" in row:     # what job_submit.lua saw of it
            theirs = plain_fields(plain, side, job).get("AdminComment", "")
            ours = re.sub(r";declared_app=[^;]*", _DECLARED.search(theirs).group(0)
                          if _DECLARED.search(theirs) else "", row["AdminComment"])
            ours = re.sub(r";(policy|share)=[^;\s]*", "", ours.replace(";tagged=1", ";tagged=0"))
            if ours != row["AdminComment"]:
                kinds.add("submit tag")
                row["AdminComment"] = ours
        if plain is not None and "wb:policy=" in row.get("SubmitLine", ""):   # 26.05+
            kinds.add("wb tag")
            line = re.sub(r" --comment=wb:policy=\S+", "", row["SubmitLine"])
            line = re.sub(r" wb:policy=\S+", "", line)
            theirs = plain_fields(plain, side, job).get("SubmitLine", "")
            if line.count(" --comment=") > theirs.count(" --comment="):   # the one it added
                i, j = line.rfind(" --comment="), line.rfind(" ")
                line = line[:i] + line[j:] if j > i else line[:i]
            row["SubmitLine"] = line
        if plain is not None and "Comment" in row and _TAG.search(row["Comment"]):
            kinds.add("wb tag")
            row["Comment"] = _TAG.sub("", row["Comment"])
            if not row["Comment"]:
                del row["Comment"]
        fields.append(row)
    scripts = [side.scripts.get(job) for job in side.ids]
    return {"rc": rc, "stdout": out, "stderr": err, "fields": fields, "scripts": scripts,
            "output": norm(side.output, side.ids)}


def _documented(case: Case, out: str, err: str, rc: int, plain: Side,
                kinds: set[str]) -> tuple[str, str, int]:
    lines = []
    for line in err.splitlines(keepends=True):
        if line.startswith("sbatch: comment ") and _TAG.search(line.rstrip("\n")):
            kinds.add("wb tag")
            line = _TAG.sub("", line.rstrip("\n")) + "\n"
            if re.fullmatch(r"sbatch: comment\s+:\s*\n", line):
                continue
        lines.append(line)
    err = "".join(lines)
    ours_help = f"\n{help_text()}"
    if case.name.startswith("help") and out.endswith(ours_help):
        kinds.add("help")
        out = out[:-len(ours_help)]
    if case.name.startswith("version") and out.endswith(f"wattbatch {__version__}\n"):
        kinds.add("version")
        out = out[:-len(f"wattbatch {__version__}\n")]
    fatal = plain.err.strip().splitlines()[-1] if plain.err.strip() else ""
    if (case.name == "no-config-help" and rc == 0 and out == help_text() and err.startswith(
            f"wattbatch: note: sbatch's own options are not shown: {fatal}; ")):
        kinds.add("help without Slurm config")
        return norm(plain.out, []), norm(plain.err, []), plain.rc
    return out, err, rc


def _diff(want: dict, got: dict) -> str:
    parts = []
    for key in want:
        if want[key] == got[key]:
            continue
        if key == "fields" and len(want[key]) == len(got[key]):
            for a, b in zip(want[key], got[key]):
                parts += [f"field {k}: {a.get(k)!r} != {b.get(k)!r}" for k in sorted(a | b)
                          if a.get(k) != b.get(k)]
        else:
            parts.append(f"{key}: {want[key]!r} != {got[key]!r}")
    return "; ".join(parts)


def test_wattbatch_as_sbatch_is_sbatch(localcluster, tmp_path, request):
    shim = make_shim(tmp_path / "shim").parent
    cases = all_cases()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SBATCH_", "WATTBATCH_SLURM_BIN"))}
    anchor = job_ids(subprocess.run(["sbatch", "--hold", "--parsable", "-J", "anchor", "-o",
                                     "/dev/null", "--wrap", "true"], capture_output=True,
                                    text=True, check=True).stdout)[0]
    results: dict[str, tuple[Side, Side]] = {}
    held: list[Side] = []
    started = time.monotonic()
    for case in cases:
        cwd = tmp_path / "cases" / case.name
        cwd.mkdir(parents=True)
        (cwd / "job.sh").write_text(case.script)
        (cwd / "empty.conf").touch()
        (cwd / "vars.env").write_text("FOO=from-file\n")
        env = {**base, **case.env}
        if case.policy != "slurm-default":
            env["WATTBATCH_POLICY"] = case.policy
        plain = run_side(case, cwd, env, anchor)
        ours = run_side(case, cwd, env_with_shim(shim, **{**case.env, **(
            {"WATTBATCH_POLICY": case.policy} if case.policy != "slurm-default" else {})}), anchor)
        results[case.name] = (plain, ours)
        if case.runs:
            read_jobs([plain, ours], plain.ids + ours.ids)
            wait_gone(plain.ids + ours.ids)
            for side in (plain, ours):
                out = [side.fields[j].get("StdOut", "") for j in side.ids]
                side.output = "".join(Path(p).read_text() for p in out if p and Path(p).exists())
            ours.output = ours.output.replace(f"{shim}{os.pathsep}", "")   # the shim's install
        else:
            held += [plain, ours]
    read_jobs(held, [j for side in held for j in side.ids])
    elapsed_s = time.monotonic() - started

    identical, documented, differ = 0, {}, []
    for case in cases:
        plain, ours = results[case.name]
        kinds: set[str] = set()
        want, got = comparable(plain, case, None, set()), comparable(ours, case, plain, kinds)
        if want != got:
            differ.append(f"{case.name}: {_diff(want, got)}")
            continue
        identical += 1
        for kind in kinds:
            documented[kind] = documented.get(kind, 0) + 1
    summary = (f"parity with sbatch: {identical} of {len(cases)} cases identical (documented "
               f"differences: {', '.join(f'{k} in {n}' for k, n in sorted(documented.items()))}"
               f"); {len(differ)} differ; {elapsed_s:.0f} s")
    request.config.stash.setdefault(SUMMARY, []).append(summary)
    assert len(cases) >= 150
    assert not differ, summary + "\n" + "\n".join(differ)
