"""Read time and memory of one snapshot: a synthetic cluster in the JSON each Slurm release prints,
decoded with ``json.loads`` and with msgspec (``slurm_plugin/slurm/decode.py``), parsed and
attached into a Cluster; and ``wattctl snapshot --squeue-json F --nodes-json F`` on the same
files against ``json.load`` of them.

    python benchmarks/bench_parse.py [--release 22.05,24.11,26.05]
        [--size 1000x10000,10000x100000] [--gpus 8] [--repeat 3] [--bare] [--no-cli]
    python benchmarks/bench_parse.py --nodes 4 --jobs 10      (one size)

Each job and node carries, besides what ``synthetic`` writes, every other field of a record
that release printed (``tests/golden/slurm/<release>/``: ~130 per job on 24.11), so a document
is as large as a real one; ``--bare`` leaves them out. Each measurement runs in a fresh process:
times are the best of ``--repeat``, memory the process's peak RSS (the input bytes included).

Goals (the project's issue on scale), per release: decode + parse <= 2 s and <= 1.2 GB at
10,000 nodes x 8 GPUs / 100,000 jobs, <= 0.2 s at 1,000 / 10,000 (the reconcile pass adds its
policy: ``bench_reconcile.py``); ``wattctl snapshot`` on the files at most a quarter of the
time ``json.load`` takes on them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.proc import run  # noqa: E402
from slurm_plugin.slurm.decode import JobRecord, NodeRecord  # noqa: E402
from slurm_plugin.slurm.synthetic import RELEASES, documents  # noqa: E402

from benchmarks._common import goal, positive_int  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "slurm"
DECODERS = ("json", "msgspec")
# the goals: (nodes, jobs) -> seconds, MB of peak RSS for decode + parse
READ_GOAL_S = {(1000, 10000): 0.2, (10000, 100000): 2.0}
READ_GOAL_RSS_MB = {(10000, 100000): 1200}
CLI_GOAL_SHARE = 0.25
# what peak_rss_mb reads, printed (peak_rss_mb=MB) when the process it starts ends
_RSS = ("import atexit, sys\n"
        "def _rss():\n"
        "    kb = next(s.split()[1] for s in open('/proc/self/status') if s.startswith('VmHWM'))\n"
        "    sys.stderr.write('peak_rss_mb=%.0f\\n' % (int(kb) / 1024))\n"
        "atexit.register(_rss)")
JSON_LOAD = _RSS + "\nimport json\nfor f in sys.argv[1:]:\n    json.load(open(f))"
WATTCTL = _RSS + "\nimport runpy\nrunpy.run_module('slurm_plugin.cli', run_name='__main__')"


def peak_rss_mb() -> float:
    """This process's peak resident memory (Linux ``VmHWM``: unlike ``ru_maxrss``, not the
    parent's, which a child started by ``vfork`` inherits)."""
    with open("/proc/self/status") as fh:
        kb = next(line.split()[1] for line in fh if line.startswith("VmHWM:"))
    return int(kb) / 1024


def recorded_fields(release: str) -> tuple[dict, dict]:
    """(job, node) fields a real record of ``release`` holds that the parsers do not read."""
    squeue = json.loads((GOLDEN / release / "squeue.json").read_text())
    listing = json.loads((GOLDEN / release / "nodes.json").read_text())
    job = next(j for j in squeue["jobs"] if "RUNNING" in str(j["job_state"]))
    return ({k: v for k, v in job.items() if k not in JobRecord.__struct_fields__},
            {k: v for k, v in listing["nodes"][0].items()
             if k not in NodeRecord.__struct_fields__})


def write_documents(folder: Path, release: str, nodes: int, gpus: int, jobs: int,
                    bare: bool) -> tuple[Path, Path]:
    nodes_doc, squeue = documents(release, nodes, gpus, jobs)
    if not bare:
        job_extra, node_extra = recorded_fields(release)
        squeue["jobs"] = [{**job_extra, **j} for j in squeue["jobs"]]
        nodes_doc["nodes"] = [{**node_extra, **n} for n in nodes_doc["nodes"]]
    paths = folder / f"nodes-{release}.json", folder / f"squeue-{release}.json"
    for path, doc in zip(paths, (nodes_doc, squeue)):
        path.write_text(json.dumps(doc))
    return paths


def measure_read(decoder: str, nodes_file: str, squeue_file: str, repeat: int) -> dict:
    """In this process: the best decode and parse+attach times of ``repeat``, and peak RSS."""
    from slurm_plugin.slurm.document import SlurmJson
    from slurm_plugin.slurm.snapshot import build_cluster
    texts = Path(nodes_file).read_bytes(), Path(squeue_file).read_bytes()
    decode = json.loads if decoder == "json" else SlurmJson
    decode_s, parse_s = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        docs = [decode(t) for t in texts]
        t1 = time.perf_counter()
        cluster = build_cluster(docs[0], docs[1], "synthetic", 0.0)
        t2 = time.perf_counter()
        decode_s.append(t1 - t0)
        parse_s.append(t2 - t1)
        del docs
    busy = sum(1 for n in cluster.nodes for g in n.gpus if not g.is_free)
    return {"decode_s": min(decode_s), "parse_s": min(parse_s),
            "total_s": min(d + p for d, p in zip(decode_s, parse_s)),
            "peak_rss_mb": peak_rss_mb(),
            "active_jobs": len(cluster.jobs), "busy_gpus": busy}


def read_in_child(decoder: str, paths: tuple[Path, Path], repeat: int) -> dict:
    out = run([sys.executable, __file__, "--measure-read", decoder, str(paths[0]),
               str(paths[1]), "--repeat", str(repeat)], timeout_s=3600).stdout
    return json.loads(out.splitlines()[-1])


def command_s(argv: list[str], repeat: int) -> tuple[float, float]:
    """(best wall time, peak RSS MB) of a command that prints ``peak_rss_mb=`` last."""
    best, rss = float("inf"), 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = run(argv, timeout_s=3600, cwd=str(ROOT))     # -m: the checkout's slurm_plugin
        best = min(best, time.perf_counter() - t0)
        rss = float(done.stderr.rsplit("peak_rss_mb=", 1)[1])
    return best, rss


def report(release: str, nodes: int, gpus: int, jobs: int, paths: tuple[Path, Path],
           repeat: int, cli: bool) -> None:
    size_mb = [p.stat().st_size / 1e6 for p in paths]
    print(f"Slurm {release} JSON, {nodes} nodes x {gpus} GPUs, {jobs} jobs: squeue "
          f"{size_mb[1]:.1f} MB, node listing {size_mb[0]:.1f} MB")
    got = {d: read_in_child(d, paths, repeat) for d in DECODERS}
    for d in DECODERS:
        r = got[d]
        print(f"  {d:<8} decode {r['decode_s'] * 1000:7.0f} ms  parse+attach "
              f"{r['parse_s'] * 1000:7.0f} ms  total {r['total_s'] * 1000:7.0f} ms  "
              f"peak RSS {r['peak_rss_mb']:6.0f} MB")
    new, old = got["msgspec"], got["json"]
    same = (new["active_jobs"], new["busy_gpus"]) == (old["active_jobs"], old["busy_gpus"])
    print(f"  {new['active_jobs']} active jobs, {new['busy_gpus']} GPUs busy"
          f"{'' if same else ' (json.loads read differs!)'}")
    print(f"  msgspec decode+parse / json.loads decode alone: "
          f"{new['total_s'] / old['decode_s']:.2f}")
    if (nodes, jobs) in READ_GOAL_S:
        limit = READ_GOAL_S[(nodes, jobs)]
        print("  " + goal(f"read <= {limit:g} s", new["total_s"] <= limit,
                          f"{new['total_s']:.2f} s"))
    if (nodes, jobs) in READ_GOAL_RSS_MB:
        limit = READ_GOAL_RSS_MB[(nodes, jobs)]
        print("  " + goal(f"read <= {limit} MB", new["peak_rss_mb"] <= limit,
                          f"{new['peak_rss_mb']:.0f} MB"))
    if cli:
        files = [str(paths[1]), str(paths[0])]
        snap_s, snap_mb = command_s([sys.executable, "-c", WATTCTL, "snapshot", "--squeue-json",
                                     files[0], "--nodes-json", files[1]], repeat)
        load_s, load_mb = command_s([sys.executable, "-c", JSON_LOAD, *files], repeat)
        print(f"  wattctl snapshot --squeue-json F --nodes-json F: {snap_s * 1000:.0f} ms, "
              f"{snap_mb:.0f} MB; python json.load of both: {load_s * 1000:.0f} ms, "
              f"{load_mb:.0f} MB")
        print("  " + goal(f"wattctl snapshot <= {CLI_GOAL_SHARE:g} x json.load",
                          snap_s <= CLI_GOAL_SHARE * load_s, f"{snap_s / load_s:.2f} x"))


def nodes_x_jobs(text: str) -> tuple[int, int]:
    """``"1000x10000"`` -> (1000, 10000)."""
    nodes, sep, jobs = text.partition("x")
    try:
        got = int(nodes), int(jobs)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give NODESxJOBS, e.g. 1000x10000") from None
    if not sep or min(got) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give NODESxJOBS, e.g. 1000x10000")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default=",".join(RELEASES),
                    help="comma-separated Slurm releases whose JSON the documents take")
    ap.add_argument("--size", default="1000x10000,10000x100000",
                    help="comma-separated NODESxJOBS")
    ap.add_argument("--nodes", type=positive_int, help="one size: this many nodes (with --jobs)")
    ap.add_argument("--jobs", type=positive_int, help="one size: this many jobs (with --nodes)")
    ap.add_argument("--gpus", type=positive_int, default=8)
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--bare", action="store_true",
                    help="only the fields the synthetic generator writes")
    ap.add_argument("--no-cli", action="store_true", help="skip the wattctl snapshot timing")
    ap.add_argument("--measure-read", nargs=3, metavar=("DECODER", "NODES", "SQUEUE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_read:
        print(json.dumps(measure_read(*args.measure_read, args.repeat)))
        return
    releases = args.release.split(",")
    for release in releases:
        if release not in RELEASES:
            ap.error(f"--release {args.release}: {release!r} is not one of "
                     f"{', '.join(RELEASES)}")
    if (args.nodes is None) != (args.jobs is None):
        ap.error("give both --nodes and --jobs, or --size")
    try:
        sizes = [(args.nodes, args.jobs)] if args.nodes else \
            [nodes_x_jobs(s) for s in args.size.split(",")]
    except argparse.ArgumentTypeError as exc:
        ap.error(f"--size {args.size}: {exc}")
    with tempfile.TemporaryDirectory() as folder:
        for nodes, jobs in sizes:
            for release in releases:
                paths = write_documents(Path(folder), release, nodes, args.gpus, jobs, args.bare)
                report(release, nodes, args.gpus, jobs, paths, args.repeat, not args.no_cli)


if __name__ == "__main__":
    main()
