"""The cases of the parity suite (test_parity.py): each a bash command line that runs ``sbatch``
from PATH, once with Slurm's own sbatch and once with wattbatch installed as ``sbatch``.

In a command: ``job.sh`` is the case's script (``Case.script``) in the case's own directory,
beside ``empty.conf`` (a slurm.conf Slurm cannot use) and ``vars.env`` (for --export-file);
``{anchor}`` is the id of a held job submitted before the suite (for dependencies). A case
whose job runs (``runs``) is pinned to one node and prints what the comparison needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

SUMMARY = pytest.StashKey[list]()     # the suite's summary lines, printed by conftest
SCRIPT = "#!/bin/bash\n#SBATCH -J parity -o /dev/null\necho hi\n"
HELD = "sbatch --hold "


@dataclass(frozen=True)
class Case:
    name: str
    cmd: str
    script: str = SCRIPT
    env: dict[str, str] = field(default_factory=dict)
    runs: bool = False          # the job runs: its output is compared too
    policy: str = "slurm-default"


def _held(name: str, options: str, **kw) -> Case:
    return Case(name, f"{HELD}{options} job.sh", **kw)


# sbatch options, one or a few at a time (on a held job)
OPTIONS = {
    "job-name": "-J named", "job-name-long": "--job-name=long_name", "job-name-prefix": "--jo=pre",
    "partition": "-p gpu", "partition-bad": "--partition=nosuch",
    "time-min": "-t 5", "time-hms": "-t 1:02:03", "time-days": "--time=1-00:00:00",
    "time-unlimited": "-t UNLIMITED", "time-bad": "-t bogus", "time-min-field": "--time-min=1 -t 9",
    "nodes-1": "-N 1", "nodes-2": "-N 2", "nodes-range": "-N 1-2", "nodes-too-many": "-N 9",
    "ntasks-2": "-n 2", "ntasks-4": "--ntasks=4", "cpus-per-task": "-c 2",
    "ntasks-per-node": "--ntasks-per-node=2", "mem": "--mem=100", "mem-g": "--mem=1G",
    "mem-bad": "--mem=abc", "mem-too-much": "--mem=100T", "mem-per-cpu": "--mem-per-cpu=50",
    "gres-gpu1": "--gres=gpu:1", "gres-gpu4": "--gres=gpu:4", "gres-gpu5": "--gres=gpu:5",
    "gres-typed": "--gres=gpu:g1:1", "gres-bad": "--gres=bogus:1", "gres-shard": "--gres=shard:2",
    "gres-prefix": "--gres=gres:gpu:1", "gpus": "--gpus=1", "gpus-short": "-G 2",
    "gpus-per-node": "--gpus-per-node=2", "gpus-per-task": "-n 1 --gpus-per-task=1",
    "cpus-per-gpu": "--gpus=1 --cpus-per-gpu=1", "mem-per-gpu": "--gpus=1 --mem-per-gpu=100",
    "nodelist": "--nodelist=gpu2", "nodelist-short": "-w gpu3", "nodelist-bad": "-w gpu9",
    "exclude": "--exclude=gpu1", "exclude-two": "-x gpu1,gpu2", "exclusive": "--exclusive",
    "exclusive-user": "--exclusive=user", "oversubscribe": "-s", "contiguous": "--contiguous",
    "requeue": "--requeue", "no-requeue": "--no-requeue", "nice": "--nice=5",
    "output": "-o out.txt", "error": "-e err.txt", "output-pattern": "-o %x-%j.out",
    "input": "-i /dev/null", "chdir": "-D /tmp", "comment": "--comment=hello",
    "comment-spaces": "--comment='hello world'", "account": "-A wattbatch",
    "account-bad": "-A nosuch", "qos": "-q normal", "qos-bad": "--qos=nosuch",
    "begin-relative": "--begin=now+1hour", "begin-date": "--begin=2030-01-02T03:04:05",
    "begin-bad": "--begin=bogus", "deadline": "--deadline=now+2days",
    "dependency-afterok": "--dependency=afterok:{anchor}", "dependency-after": "-d after:{anchor}",
    "dependency-any": "-d afterany:{anchor}?afterok:{anchor}", "dependency-singleton":
    "--dependency=singleton", "dependency-missing": "--dependency=afterok:99999999",
    "kill-on-invalid-dep": "--kill-on-invalid-dep=yes -d afterok:{anchor}",
    "mail": "--mail-type=END,FAIL --mail-user=a@example.org", "signal": "--signal=USR1@60",
    "signal-batch": "--signal=B:TERM@30", "open-mode": "--open-mode=append",
    "reservation-bad": "--reservation=nosuch", "licenses-bad": "-L nosuch",
    "constraint-bad": "-C nosuch", "tmp": "--tmp=10", "mincpus": "--mincpus=2",
    "hint": "--hint=nomultithread", "distribution": "-m cyclic", "threads-per-core":
    "--threads-per-core=1", "propagate": "--propagate=NONE", "wckey": "--wckey=wk",
    "cpu-freq": "--cpu-freq=high", "acctg-freq": "--acctg-freq=30", "profile": "--profile=none",
    "delay-boot": "--delay-boot=5", "use-min-nodes": "--use-min-nodes -N 1-2",
    "spread-job": "--spread-job", "array": "--array=1-3", "array-throttle": "--array=0-9%2",
    "array-list": "-a 1,3,5", "array-step": "--array=1-7:2", "array-bad": "--array=bogus",
    "array-gpu": "--array=1-2 --gres=gpu:1", "quiet": "-Q", "verbose": "-v", "combined": "-HQ",
    "parsable": "--parsable", "parsable-array": "--parsable --array=1-2",
    "cluster": "-M wattbatch", "priority": "--priority=10", "core-spec": "-S 0",
    "sockets": "--sockets-per-node=1", "cores": "--cores-per-socket=1", "overcommit": "-O",
    "no-kill": "-k", "gres-flags": "--gres=gpu:1 --gres-flags=enforce-binding",
    "time-and-gres": "-t 30 --gres=gpu:2 -c 2 --mem=200", "export-none": "--export=NONE",
    "export-all": "--export=ALL", "export-var": "--export=ALL,FOO=bar",
    "wait-all-nodes": "--wait-all-nodes=1", "ntasks-per-core": "--ntasks-per-core=1",
    "unknown-option": "--nosuchopt", "ambiguous-option": "--ex=gpu1", "invalid-short": "-Z",
    "missing-argument": "-J", "bad-flag-value": "--contiguous=yes", "nodefile-missing":
    "-F /nonexistent", "export-file-missing": "--export-file=/nonexistent",
    # options 22.05 lacks (its sbatch rejects them; wattbatch must read them as 24.11/26.05 do)
    "tres-per-task": "--tres-per-task=gres/gpu:1", "oom-kill-step": "--oom-kill-step=1",
    "resv-ports-optional": "--resv-ports", "requeue-value": "--requeue=expedite",
    "prefix-res": "--res=nosuch",       # 22.05: --reservation; later: ambiguous (--resv-ports)
}

# #SBATCH lines (the script holds them; the command line is plain)
DIRECTIVES = {
    "directive-basic": "#SBATCH -J fromscript -t 5\n",
    "directive-several": "#SBATCH -J a\n#SBATCH --time=3\n#SBATCH -c 2 --mem=100\n",
    "directive-gres": "#SBATCH --gres=gpu:1\n",
    "directive-quoted": "#SBATCH --comment=\"a b\"\n",
    "directive-comment": "#SBATCH -J x # a comment\n",
    "directive-old": "#SLURM -J old\n",
    "directive-bad-option": "#SBATCH --bogus\n",
    "directive-no-dash": "#SBATCH noword\n",
    "directive-array": "#SBATCH --array=1-2%1\n",
    "directive-export": "#SBATCH --export=NONE\n",
    "directive-after-blank": "\n# note\n#SBATCH -J late-but-in-header\n",
    "directive-unmatched-quote": "#SBATCH --comment=\"open\n",
    "directive-wattbatch": "#WATTBATCH app=resnet18\n#SBATCH -J wb\n",
}

# ways to give the script
FORMS = {
    "form-file": f"{HELD}job.sh",
    "form-pipe": f"cat job.sh | {HELD}",
    "form-redirect": f"{HELD}< job.sh",
    "form-dev-stdin-pipe": f"cat job.sh | {HELD}--parsable /dev/stdin",
    "form-dev-stdin-redirect": f"{HELD}/dev/stdin < job.sh",
    "form-heredoc": f"{HELD}<<'EOF'\n#!/bin/bash\n#SBATCH -J heredoc\necho hi\nEOF",
    "form-heredoc-dev-stdin": f"{HELD}/dev/stdin <<'EOF'\n#!/bin/bash\necho hi\nEOF",
    "form-process-substitution": f"{HELD}<(cat job.sh)",
    "form-process-substitution-args": f"{HELD}<(cat job.sh) a b",
    "form-named-pipe": f"rm -f fifo; mkfifo fifo; (cat job.sh > fifo &); {HELD}fifo",
    "form-wrap": f"{HELD}--wrap='echo hi'",
    "form-wrap-quotes": f"{HELD}--wrap 'echo \"a b\" $HOME'",
    "form-wrap-and-script": f"{HELD}--wrap=hostname job.sh",
    "form-args": f"{HELD}job.sh a 'b c' -J notanoption",
    "form-double-dash": f"{HELD}-- job.sh x",
    "form-dev-fd": f"exec 7< job.sh; {HELD}/dev/fd/7",
    "form-missing": f"{HELD}missing.sh",
    "form-directory": f"{HELD}.",
    "form-empty-stdin": f"{HELD}< /dev/null",
    "form-empty-file": f": > empty.sh; {HELD}empty.sh",
    "form-no-shebang": f"printf 'echo hi\\n' > plain.sh; {HELD}plain.sh",
    "form-crlf": f"printf '#!/bin/bash\\r\\necho hi\\r\\n' > dos.sh; {HELD}dos.sh",
    "form-non-utf8": f"printf '#!/bin/bash\\n#SBATCH -J \\xff\\xfe\\necho \\xe9\\n' | {HELD}",
    "form-non-utf8-file": f"printf '#!/bin/bash\\necho \\xe9\\n' > latin.sh; {HELD}latin.sh",
    "form-code-before-directive": f"printf '#!/bin/bash\\necho\\n#SBATCH -J late\\n' | {HELD}",
    "form-python-script": f"printf '#!/usr/bin/env python3\\nprint(1)\\n' > p.py; {HELD}p.py",
    "form-big-script": f"(printf '#!/bin/bash\\n'; seq -f 'echo %g' 20000) | {HELD}",
    "form-hetjob": f"{HELD}-n1 : -n1 job.sh",
}

INFO = {
    "help": "sbatch --help", "help-short": "sbatch -h", "usage": "sbatch --usage",
    "version": "sbatch --version", "version-short": "sbatch -V",
    "test-only": "sbatch --test-only job.sh", "test-only-gres": "sbatch --test-only -G 1 job.sh",
    "test-only-bad": "sbatch --test-only -p nosuch job.sh",
    "no-config": f"SLURM_CONF=$PWD/empty.conf {HELD}job.sh",
    "no-config-help": "SLURM_CONF=$PWD/empty.conf sbatch --help",
}

# environment forms
ENVIRONMENT = {
    "env-job-name": {"SBATCH_JOB_NAME": "envname"},
    "env-time": {"SBATCH_TIMELIMIT": "7"},
    "env-partition-bad": {"SBATCH_PARTITION": "nosuch"},
    "env-gres": {"SBATCH_GRES": "gpu:1"},
    "env-array": {"SBATCH_ARRAY_INX": "1-2"},
    "env-export": {"SBATCH_EXPORT": "NONE"},
    "env-exclusive": {"SBATCH_EXCLUSIVE": "user"},
    "env-requeue": {"SBATCH_REQUEUE": "1"},
    "env-wb-ignored-by-sbatch": {"WATTBATCH_APP": "vgg16"},
}

# jobs that run: what the job sees of its environment (every export form) and --wait
ENV_PRINT = ("#!/bin/bash\nenv | grep -E '^(FOO|BAR|HOME|USER|PATH|WATTBATCH_[A-Z_]*|"
             "SLURM_EXPORT_ENV|SLURM_JOB_NAME|SLURM_SUBMIT_DIR)=' | sort\n")
RUN = "sbatch -w gpu1 -o '%x-%j.out' "
RUNS = {
    "run-export-default": "",
    "run-export-none": "--export=NONE",
    "run-export-all": "--export=ALL",
    "run-export-all-plus": "--export=ALL,FOO=set",
    "run-export-named": "--export=FOO",
    "run-export-assign": "--export=FOO=one,BAR=two",
    "run-export-nil": "--export=NIL",
    "run-export-file": "--export-file=vars.env",
    "run-export-env-var": "",                         # SBATCH_EXPORT=FOO in the environment
    "run-wait-ok": "--wait",
    "run-wait-fail": "-W",
}


def all_cases() -> list[Case]:
    cases = [_held(name, opts) for name, opts in OPTIONS.items()]
    cases += [Case(name, f"{HELD}job.sh", script="#!/bin/bash\n" + lines + "echo hi\n")
              for name, lines in DIRECTIVES.items()]
    cases += [Case(name, cmd) for name, cmd in FORMS.items()]
    cases += [Case(name, cmd) for name, cmd in INFO.items()]
    cases += [Case(name, f"{HELD}job.sh", env=env) for name, env in ENVIRONMENT.items()]
    cases.append(Case("command-line-beats-script", f"{HELD}-J cli -t 9 job.sh",
                      script="#!/bin/bash\n#SBATCH -J script -t 3\necho\n"))
    cases.append(Case("env-beats-script", f"{HELD}job.sh", env={"SBATCH_JOB_NAME": "env"},
                      script="#!/bin/bash\n#SBATCH -J script\necho\n"))
    for name, opts in RUNS.items():
        env = {"FOO": "from-submitter", "BAR": "b"}
        if name == "run-export-env-var":
            env["SBATCH_EXPORT"] = "FOO"
        script = ENV_PRINT if name.startswith("run-export") else (
            "#!/bin/bash\nexit 3\n" if name == "run-wait-fail" else "#!/bin/bash\necho done\n")
        cases.append(Case(name, RUN + opts + " job.sh", script=script, env=env, runs=True))
    # the EaCO policy where no GPU is shared (CPU jobs): only its tag may differ
    for name in ("job-name", "ntasks-2", "time-hms", "array-throttle", "exclusive",
                 "dependency-afterok", "mem", "nodelist", "comment", "begin-relative"):
        cases.append(_held(f"eaco-{name}", OPTIONS[name], policy="eaco"))
    cases.append(Case("eaco-form-pipe", FORMS["form-pipe"], policy="eaco"))
    cases.append(Case("eaco-form-process-substitution", FORMS["form-process-substitution"],
                      policy="eaco"))
    return cases
