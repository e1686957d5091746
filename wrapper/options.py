"""Every option of sbatch 22.05, 24.11 and 26.05, in one table.

Checked against the ``sbatch`` binaries 22.05.8 (Debian 12), 24.11.5 (Debian 13) and 26.05.5
(Debian sid): ``sbatch --<letter>`` lists every long option that starts with that letter
("ambiguous; possibilities: ..."), and the getopt messages "requires an argument" / "doesn't
allow an argument" tell how each takes its value (``--NAME=x`` and a bare ``--NAME`` for each
name, ``-X`` for each letter). Hidden aliases (``--cluster``, ``--tasks-per-node``,
``--context``, ``--ntasks-per-tres``) are included. The short letters are the same in all three.

The table is the union of the three releases; a comment marks an option not in all of them
("24.11+": absent from 22.05.8, present in 24.11.5 and 26.05.5; releases in between were not
checked). Where a release takes a value the others do not (``--requeue[=expedite]`` from
26.05, ``--get-user-env[=timeout]`` before it), the option is ``optional`` here: both forms
split the command line the same way, and sbatch itself judges the value. An option a release
lacks is sbatch's error to report, as is a prefix ambiguous only in the union (``--res``:
``--reservation`` in 22.05, ambiguous with ``--resv-ports`` from 24.11).

``arg`` is ``"none"`` (a flag), ``"required"`` (``--opt=V``, ``--opt V``, ``-xV``, ``-x V``) or
``"optional"`` (only ``--opt=V`` / ``-xV``: a separate word is NOT the value, as in getopt).
``field`` names the :class:`wrapper.request.SbatchView` attribute the option feeds ("" when
wattbatch's policy does not look at it: the option is still passed through unchanged).
``env`` is the ``SBATCH_*`` variable sbatch reads for it (command line > env > ``#SBATCH``).
"""

from __future__ import annotations

from slurm_plugin.record import record

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Literal

    Arg = Literal["none", "required", "optional"]

@record
class Opt:
    name: str                 # long name without dashes, as sbatch spells it
    short: str = ""           # one letter, "" if none
    arg: Arg = "required"
    field: str = ""           # what the policy reads from it ("" = passed through only)
    env: str = ""             # SBATCH_* environment variable with the same meaning
    alias_of: str = ""        # hidden alias: the canonical long name

    @property
    def canonical(self) -> str:
        return self.alias_of or self.name


def _o(name: str, short: str = "", arg: Arg = "required", field: str = "", env: str = "",
       alias_of: str = "") -> Opt:
    return Opt(name, short, arg, field, env, alias_of)


OPTIONS: tuple[Opt, ...] = (
    _o("account", "A", field="account", env="SBATCH_ACCOUNT"),
    _o("acctg-freq", env="SBATCH_ACCTG_FREQ"),
    _o("array", "a", field="array", env="SBATCH_ARRAY_INX"),
    _o("autocomplete"),                                         # 24.11+
    _o("batch", env="SBATCH_BATCH"),
    _o("bb"),
    _o("bbf"),
    _o("begin", "b", field="begin"),
    _o("chdir", "D"),
    _o("cluster", alias_of="clusters"),
    _o("cluster-constraint"),
    _o("clusters", "M", field="clusters", env="SBATCH_CLUSTERS"),
    _o("comment", field="comment"),
    _o("consolidate-segments", arg="none"),                     # 26.05+
    _o("constraint", "C", field="constraint", env="SBATCH_CONSTRAINT"),
    _o("container", env="SBATCH_CONTAINER"),
    _o("container-id", env="SBATCH_CONTAINER_ID"),              # 24.11+
    _o("container-type", env="SBATCH_CONTAINER_TYPE"),          # 26.05+
    _o("context"),
    _o("contiguous", arg="none"),
    _o("core-spec", "S", env="SBATCH_CORE_SPEC"),
    _o("cores-per-socket"),
    _o("cpu-freq"),
    _o("cpus-per-gpu", env="SBATCH_CPUS_PER_GPU"),
    _o("cpus-per-task", "c"),
    _o("deadline", field="deadline"),
    _o("delay-boot", env="SBATCH_DELAY_BOOT"),
    _o("dependency", "d"),
    _o("distribution", "m", env="SBATCH_DISTRIBUTION"),
    _o("error", "e", env="SBATCH_ERROR"),
    _o("exclude", "x", field="exclude"),
    _o("exclusive", arg="optional", env="SBATCH_EXCLUSIVE"),
    _o("export", env="SBATCH_EXPORT"),
    _o("export-file"),
    _o("external", arg="none"),                                 # 26.05+
    _o("extra"),              # 24.11+ (22.05: "--extra" was a prefix of --extra-node-info)
    _o("extra-node-info", "B"),
    _o("get-user-env", arg="optional", env="SBATCH_GET_USER_ENV"),   # 26.05: a flag (none)
    _o("gid"),
    _o("gpu-bind", env="SBATCH_GPU_BIND"),
    _o("gpu-freq", env="SBATCH_GPU_FREQ"),
    _o("gpus", "G", field="gpus", env="SBATCH_GPUS"),
    _o("gpus-per-node", field="gpus_per_node", env="SBATCH_GPUS_PER_NODE"),
    _o("gpus-per-socket", field="gpus_per_socket"),
    _o("gpus-per-task", field="gpus_per_task", env="SBATCH_GPUS_PER_TASK"),
    _o("gres", field="gres", env="SBATCH_GRES"),
    _o("gres-flags", env="SBATCH_GRES_FLAGS"),
    _o("help", "h", arg="none", field="info"),
    _o("hint", env="SBATCH_HINT"),
    _o("hold", "H", arg="none", field="hold"),
    _o("ignore-pbs", arg="none", env="SBATCH_IGNORE_PBS"),
    _o("input", "i", env="SBATCH_INPUT"),
    _o("job-name", "J", field="job_name", env="SBATCH_JOB_NAME"),
    _o("kill-on-invalid-dep"),
    _o("licenses", "L"),
    _o("mail-type"),
    _o("mail-user"),
    _o("mcs-label"),
    _o("mem", env="SBATCH_MEM_PER_NODE"),
    _o("mem-bind", env="SBATCH_MEM_BIND"),
    _o("mem-per-cpu", env="SBATCH_MEM_PER_CPU"),
    _o("mem-per-gpu", field="mem_per_gpu", env="SBATCH_MEM_PER_GPU"),
    _o("mem-update"),                                           # 26.05+
    _o("mincpus"),
    _o("network", env="SBATCH_NETWORK"),
    _o("nice", arg="optional", field="nice"),
    _o("no-kill", "k", arg="optional", env="SBATCH_NO_KILL"),
    _o("no-requeue", arg="none", env="SBATCH_NO_REQUEUE"),
    _o("nodefile", "F", field="nodefile"),
    _o("nodelist", "w", field="nodelist"),
    _o("nodes", "N", field="nodes"),
    _o("ntasks", "n"),
    _o("ntasks-per-core"),
    _o("ntasks-per-gpu"),
    _o("ntasks-per-node"),
    _o("ntasks-per-socket"),
    _o("ntasks-per-tres"),
    _o("oom-kill-step", arg="optional"),                        # 24.11+
    _o("open-mode", env="SBATCH_OPEN_MODE"),
    _o("output", "o", env="SBATCH_OUTPUT"),
    _o("overcommit", "O", arg="none", env="SBATCH_OVERCOMMIT"),
    _o("oversubscribe", "s", arg="none"),
    _o("parsable", arg="none"),
    _o("partition", "p", field="partition", env="SBATCH_PARTITION"),
    _o("power", env="SBATCH_POWER"),        # 22.05 only (24.11's --help still lists it)
    _o("prefer"),
    _o("priority"),
    _o("profile", env="SBATCH_PROFILE"),
    _o("propagate", arg="optional"),
    _o("qos", "q", env="SBATCH_QOS"),
    _o("quiet", "Q", arg="none"),
    _o("reboot", arg="none"),
    _o("requeue", arg="optional", env="SBATCH_REQUEUE"),   # a flag before 26.05 (=expedite)
    _o("reservation", env="SBATCH_RESERVATION"),
    _o("resources"),                                            # 26.05+
    _o("resv-ports", arg="optional"),                           # 24.11+
    _o("segment", env="SBATCH_SEGMENT_SIZE"),                   # 24.11+
    _o("signal", env="SBATCH_SIGNAL"),
    _o("sockets-per-node"),
    _o("spread-job", arg="none", env="SBATCH_SPREAD_JOB"),
    _o("spread-segments", arg="none"),                          # 26.05+
    _o("stepmgr", arg="none"),                                  # 24.11+
    _o("switches"),
    _o("tasks-per-node", alias_of="ntasks-per-node"),
    _o("test-only", arg="none", field="test_only"),
    _o("thread-spec", env="SBATCH_THREAD_SPEC"),
    _o("threads-per-core", env="SBATCH_THREADS_PER_CORE"),
    _o("time", "t", field="time", env="SBATCH_TIMELIMIT"),
    _o("time-min"),
    _o("tmp"),
    _o("tres-bind", env="SBATCH_TRES_BIND"),                    # 24.11+
    _o("tres-per-task", field="tres_per_task", env="SBATCH_TRES_PER_TASK"),   # 24.11+
    _o("uid"),
    _o("usage", arg="none", field="info"),
    _o("use-min-nodes", arg="none", env="SBATCH_USE_MIN_NODES"),
    _o("verbose", "v", arg="none"),
    _o("version", "V", arg="none", field="info"),
    _o("wait", "W", arg="none", env="SBATCH_WAIT"),
    _o("wait-all-nodes", env="SBATCH_WAIT_ALL_NODES"),
    _o("wckey", env="SBATCH_WCKEY"),
    _o("wrap", field="wrap"),
)

BY_NAME: dict[str, Opt] = {o.name: o for o in OPTIONS}
BY_SHORT: dict[str, Opt] = {o.short: o for o in OPTIONS if o.short}


class OptionLookupError(ValueError):
    """An option sbatch itself would reject (unknown, ambiguous, missing value)."""


def lookup_long(word: str) -> Opt:
    """Resolve a long name as getopt_long does: exact, else a unique prefix (aliases agree)."""
    if word in BY_NAME:
        return BY_NAME[word]
    matches = [o for o in OPTIONS if o.name.startswith(word)] if word else []
    if not matches:
        raise OptionLookupError(f"unrecognized option '--{word}'")
    if len({m.canonical for m in matches}) > 1:
        names = " ".join(f"'--{m.name}'" for m in matches)
        raise OptionLookupError(f"option '--{word}' is ambiguous; possibilities: {names}")
    return matches[0]


def lookup_short(letter: str) -> Opt:
    try:
        return BY_SHORT[letter]
    except KeyError:
        raise OptionLookupError(f"invalid option -- '{letter}'") from None
