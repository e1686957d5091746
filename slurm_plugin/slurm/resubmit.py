"""Resubmitting a job slurmctld has forgotten, from what Slurm's accounting kept of it.

A job a lost requeue ended (``watch.py``) cannot be requeued once slurmctld has forgotten it
(``MinJobAge`` after it ended). What the accounting kept is enough to submit it again:

- its batch script and environment, where the site stores them
  (``AccountingStoreFlags=job_script,job_env``; ``sacct --batch-script``, ``--env-vars``);
  without the script nothing is submitted and the error says which flag is missing;
- its request (``sacct`` fields): name, partition, account, QOS, time limit, working
  directory, node count, memory, constraint and its GPUs (``ReqTRES``), unless the caller
  gives the count the journal says;
- from the command line it was submitted with (``SubmitLine``), the few options no field
  holds: output, error and input paths, task layout, memory per CPU, signal and mail. Every
  other option of that line is not replayed; the script's own ``#SBATCH`` lines are, by
  sbatch itself.

The new job carries ``--comment="wattbatch: resubmission of job N"`` (before the job's own
comment, if any), so that a pass that died between sbatch and its journal line finds it
(``find_resubmission``) and never submits it twice. Run as root, sbatch submits it as the
job's own user and group (``--uid``/``--gid``); run as anyone else, only that user's jobs.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Sequence

from ..config import SiteConfig
from ..errors import InputError
from ..record import record
from .cli import slurm

MARK = "wattbatch: resubmission of job "
FIELDS = ("JobIDRaw", "User", "Group", "JobName", "Partition", "Account", "QOS",
          "TimelimitRaw", "WorkDir", "NNodes", "ReqTRES", "Constraints", "Comment",
          "SubmitLine")
# SubmitLine options replayed: spelling -> the long option sbatch is given
_REPLAYED = {"-o": "--output", "--output": "--output", "-e": "--error", "--error": "--error",
             "-i": "--input", "--input": "--input", "-n": "--ntasks", "--ntasks": "--ntasks",
             "-c": "--cpus-per-task", "--cpus-per-task": "--cpus-per-task",
             "--ntasks-per-node": "--ntasks-per-node", "--mem-per-cpu": "--mem-per-cpu",
             "--mem-per-gpu": "--mem-per-gpu", "--signal": "--signal",
             "--mail-type": "--mail-type", "--mail-user": "--mail-user",
             "--open-mode": "--open-mode"}
# sbatch options that take no value unless attached (``--nice=5``): every other option's value
# may be the next word
_NO_VALUE_SHORT = set("HhOQsVvWu")
_NO_VALUE_LONG = {"--parsable", "--hold", "--exclusive", "--requeue", "--no-requeue", "--wait",
                  "--overcommit", "--quiet", "--verbose", "--contiguous", "--spread-job",
                  "--use-min-nodes", "--ignore-pbs", "--test-only", "--get-user-env",
                  "--no-kill", "--oversubscribe", "--nice", "--help", "--usage",
                  "--version", "--propagate", "--kill-on-invalid-dep", "--reboot"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}


@record
class LostJob:
    """What the accounting kept of a job: enough to submit it again."""

    job_id: str
    user: str
    group: str
    script: str
    env: tuple[str, ...]           # NAME=value, as it was submitted ((): not stored)
    options: tuple[str, ...]       # sbatch options for the request, without the GPUs
    gres_per_node: str             # gpu:2, shard:4 ("" : no GPUs asked)
    num_nodes: int
    comment: str = ""              # the job's own comment


def lost_job(job_id: str, cfg: SiteConfig) -> LostJob:
    """The accounting's record of ``job_id``; ``InputError`` naming what is missing when it
    cannot be submitted again (no record, no stored script)."""
    out = slurm("sacct", ["-X", "-n", "-P", "-j", job_id, "--format=" + ",".join(FIELDS)],
                cfg).stdout
    row = next((dict(zip(FIELDS, line.split("|", len(FIELDS) - 1)))
                for line in out.splitlines() if line.split("|", 1)[0] == job_id), None)
    if row is None or len(row) < len(FIELDS):
        raise InputError(f"slurm: job {job_id}: the accounting (sacct) has no record of it")
    script = _stored(slurm("sacct", ["-j", job_id, "--batch-script"], cfg).stdout)
    if not script.strip() or script.strip() == "NONE":
        raise InputError(f"slurm: job {job_id}: the accounting kept no batch script (set "
                         "AccountingStoreFlags=job_script in slurm.conf to have it kept)")
    env = _stored(slurm("sacct", ["-j", job_id, "--env-vars"], cfg).stdout)
    nodes = int(row["NNodes"]) if row["NNodes"].isdigit() and int(row["NNodes"]) > 0 else 1
    return LostJob(job_id, row["User"], row["Group"], script,
                   tuple(_env_lines(env)) if env.strip() not in ("", "NONE") else (),
                   tuple(_request_options(row, nodes)), _gres_per_node(row["ReqTRES"], nodes),
                   nodes, row["Comment"])


def _stored(text: str) -> str:
    """What ``sacct --batch-script``/``--env-vars`` printed, without its two header lines
    (``Batch Script for N`` and a line of dashes)."""
    lines = text.split("\n")
    if len(lines) >= 2 and set(lines[1].strip()) == {"-"}:
        lines = lines[2:]
    return "\n".join(lines)


def _env_lines(text: str) -> list[str]:
    """NAME=value per variable; a line that starts no variable continues the one before."""
    out: list[str] = []
    for line in text.rstrip("\n").split("\n"):
        if _ENV_NAME.match(line) or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return [e for e in out if _ENV_NAME.match(e)]


def _request_options(row: dict[str, str], nodes: int) -> list[str]:
    opts = [f"--job-name={row['JobName']}", f"--nodes={nodes}"]
    for key, opt in (("Partition", "--partition"), ("Account", "--account"),
                     ("QOS", "--qos"), ("WorkDir", "--chdir"),
                     ("Constraints", "--constraint")):
        if row[key]:
            opts.append(f"{opt}={row[key]}")
    if row["TimelimitRaw"].isdigit():
        opts.append(f"--time={row['TimelimitRaw']}")
    mem_mib = _tres_mem_mib(row["ReqTRES"])
    if mem_mib:
        opts.append(f"--mem={max(1, round(mem_mib / nodes))}M")
    return opts + replayed_options(row["SubmitLine"])


def replayed_options(submit_line: str) -> list[str]:
    """The options of ``_REPLAYED`` in an sbatch command line, as ``--long=value``: exact
    spellings only (``-oPATH``, ``-o PATH``, ``--output=PATH``, ``--output PATH``), up to the
    script's path (the first word that is no option and no option's value). Words are split
    on blanks, as Slurm stored the line."""
    words = submit_line.split()
    out, i = [], 1 if words[:1] and words[0].endswith("sbatch") else 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        word = words[i]
        long = word.startswith("--")
        name, eq, value = word.partition("=") if long else (word[:2], "", word[2:])
        takes_next = not eq and not value and i + 1 < len(words) and \
            (name not in _NO_VALUE_LONG if long else name[1:] not in _NO_VALUE_SHORT)
        if takes_next:
            value, i = words[i + 1], i + 1
        if name in _REPLAYED and value:
            out.append(f"{_REPLAYED[name]}={value}")
        i += 1
    return out


def _tres(req_tres: str) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in req_tres.split(",") if "=" in item)


def _tres_mem_mib(req_tres: str) -> float:
    mem = _tres(req_tres).get("mem", "")
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)", mem)
    return float(m.group(1)) * _MEM_UNITS[m.group(2) or "M"] if m else 0.0


def _gres_per_node(req_tres: str, nodes: int) -> str:
    """The job's untyped GPU (or share) request per node from ``ReqTRES``'s totals."""
    tres = _tres(req_tres)
    for name in ("gpu", "shard", "mps"):
        total = tres.get(f"gres/{name}", "")
        if total.isdigit() and int(total) > 0:
            return f"{name}:{max(1, int(total) // nodes)}"
    return ""


def find_resubmission(job_id: str, cfg: SiteConfig) -> str | None:
    """The job already submitted again for ``job_id`` that slurmctld still knows, if any."""
    out = slurm("squeue", ["-h", "--states=all", "-o", "%i|%k"], cfg).stdout
    for line in out.splitlines():
        new_id, _, comment = line.partition("|")
        if comment.startswith(f"{MARK}{job_id}") and \
                comment[len(MARK) + len(job_id):][:1] in ("", ";", " "):
            return new_id.strip()
    return None


def resubmit(lost: LostJob, cfg: SiteConfig, gpus: int | None = None,
             num_nodes: int | None = None) -> str:
    """Submit ``lost`` again; return the new job id. ``gpus``/``num_nodes``: the count the
    journal says (whole GPUs per node), else the job's own request."""
    from .actions import submit
    options = [o for o in lost.options if not (num_nodes and o.startswith("--nodes="))]
    if num_nodes:
        options.append(f"--nodes={num_nodes}")
    gres = f"gpu:{gpus}" if gpus else lost.gres_per_node
    if gres:
        options.append(f"--gres={gres}")
    options.append(f"--comment={MARK}{lost.job_id}"
                   + (f"; {lost.comment}" if lost.comment else ""))
    options += _identity(lost)
    env = list(lost.env)
    if "WATTBATCH_CHECKPOINT_DIR" in lost.script and \
            not any(e.startswith("WATTBATCH_CHECKPOINT_DIR=") for e in env):
        # a wattbatch elastic job resumes from the checkpoints of the run that was lost
        workdir = next((o.partition("=")[2] for o in options if o.startswith("--chdir=")), ".")
        env.append(f"WATTBATCH_CHECKPOINT_DIR={workdir}/.wattbatch/checkpoints/{lost.job_id}")
    if not lost.env:
        # no stored environment: the job's own variables only (SLURM_*; --export=NAME=value
        # exports that one beside them), as sbatch --export=NONE would give it
        extra = [e for e in env if "," not in e]
        return submit([*options, "--export=" + (",".join(extra) or "NONE")], lost.script, cfg)
    # the file's variables are the job's whole environment, sbatch's own not added (checked on
    # 22.05, 24.11 and 26.05; 26.05 reads the file only beside an explicit --export=ALL)
    with tempfile.NamedTemporaryFile("w", prefix="wattbatch-env-", suffix=".0") as fh:
        fh.write("\0".join(env) + "\0")
        fh.flush()
        os.chmod(fh.name, 0o644)        # sbatch --uid reads it after dropping to the user
        return submit([*options, "--export=ALL", f"--export-file={fh.name}"], lost.script,
                      cfg)


def _identity(lost: LostJob) -> Sequence[str]:
    """``--uid``/``--gid`` when run as root; the job's own user may submit it as itself."""
    import pwd
    if os.geteuid() == 0:
        return [f"--uid={lost.user}", f"--gid={lost.group}"] if lost.user else []
    me = pwd.getpwuid(os.geteuid()).pw_name
    if lost.user and lost.user != me:
        raise InputError(f"slurm: job {lost.job_id} belongs to {lost.user}; only root can "
                         f"submit it again as its user (this runs as {me})")
    return []
