"""NVML replay files (``nvml_replay.py``) synthesised from the emulated physics, for tests and
benchmarks where no GPU is: what each pynvml call would have returned on GPUs whose jobs draw
as ``emulated.gpu_state`` says, and each job's true energy (its own power, the idle power split
evenly, integrated over ``STEP_S``). ``scripts/synth_nvml_traces.py`` writes
``tests/data/nvml/``.

Every pass of every GPU holds its name, power (over the last step), energy counter, GPU
utilisation (memory utilisation is not modelled: 0), memory, power limit, its range and
default, and its MIG mode. Then, by how the GPU is shared:

- ``shard`` (time-sliced): each job's two processes as compute processes, one
  per-process utilisation sample a second for the first (the job's utilisation over that
  second), and a monitoring process of no job with a 1% sample;
- ``mps``: the MPS server as the one compute process, the jobs' processes as MPS clients, and
  every sample on the server (the pool's utilisation), as NVML reports MPS;
- ``mig``: each MIG device's slices and processes; in MIG mode NVML gives no utilisation.
  The physics has no MIG: a job on a device of ``s`` of the GPU's ``MIG_SLICES`` slices is
  taken to draw ``s / MIG_SLICES`` of the idle power and of its class's solo dynamic power.

``board_calls``, ``shared_calls`` and ``samples_at`` make a GPU's record;
``emulated_nvml.py`` shows the local cluster's emulated GPUs live by the same conventions.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import InputError
from ..model import Gpu, GpuUse, Job
from ..physics import job_class
from ..physics.gpu_models import lookup
from ..record import record
from .emulated import gpu_state
from .nvml_replay import FORMAT

STEP_S = 0.5            # the physics' time step
SAMPLE_S = 1.0          # one per-process utilisation sample per process a second
BUFFER_S = 4.0          # a pass holds the samples of the last BUFFER_S seconds
MIG_SLICES = 7          # GPU-instance slices of an A100/H100/H200
MIB = 1024 * 1024
ENERGY_BASE_MJ = 912_345_678_000     # the counter counts since the driver loaded
T0_S = 1_700_000_000.0
AGENT_PID, SERVER_PID, JOB_PID = 900, 3000, 4000
# an H100 80GB's GPU-instance profiles by slices: multiprocessors, memory (MB)
MIG_PROFILES = {1: (16, 10 * 1024), 2: (32, 20 * 1024), 3: (60, 40 * 1024), 4: (64, 40 * 1024),
                7: (132, 80 * 1024)}


@record
class SynthJob:
    job_id: str
    app: str
    start_s: float          # seconds from the trace's start
    end_s: float
    shares: int = 0         # shards or MPS percent held
    slot: int = -1          # MIG: the slot of the MIG device it runs on


@record
class SynthGpu:
    mode: str                           # "shard", "mps" or "mig"
    jobs: tuple[SynthJob, ...]
    mig_slices: tuple[int, ...] = ()    # MIG: slices of the device in each slot


def _runs(job: SynthJob, t_s: float) -> bool:
    return job.start_s <= t_s < job.end_s


def _step(gpu: SynthGpu, index: int, model: str, node: str,
          t_s: float) -> tuple[float, float, float, dict[str, float], dict[str, float]]:
    """GPU power, utilisation and memory at ``t_s`` (from the start), each running job's
    utilisation and true power."""
    running = [j for j in gpu.jobs if _runs(j, t_s)]
    m = lookup(model)
    if gpu.mode == "mig":
        idle, power, mem, own = m.idle_power_w, m.idle_power_w, 0.0, {}
        for j in running:
            frac = gpu.mig_slices[j.slot] / MIG_SLICES
            dynamic = job_class(j.app).dynamic_power_at(1, model) * frac
            own[j.job_id] = idle * frac + dynamic
            power += dynamic
            mem += job_class(j.app).memory_mib
        return min(power, m.max_power_w), 0.0, mem, {}, own
    jobs = {j.job_id: Job(j.job_id, "RUNNING", app=j.app, uses=(GpuUse(node, index, j.shares),))
            for j in running}
    st = gpu_state(Gpu(node, index, model=model, memory_mib=int(m.memory_mib),
                       shard_jobs=tuple(jobs)), jobs)
    return (st.power_w, st.util_pct, st.mem_used_mib,
            {r.job_id: r.util_pct or 0.0 for r in st.residents}, dict(st.job_power_w))


def job_pids(mode: str, k: int) -> tuple[int, ...]:
    """The processes of the ``k``-th job of the node: two on a time-sliced GPU, else one."""
    pid = JOB_PID + 10 * k
    return (pid, pid + 1) if mode == "shard" else (pid,)


def process(pid: int, app: str) -> dict:
    """A compute process holding its class's memory (none for a process of no job, ``""``,
    or of a class the physics does not know)."""
    try:
        used_mib = job_class(app).memory_mib if app else 0
    except InputError:
        used_mib = 0
    return {"pid": pid, "usedGpuMemory": used_mib * MIB}


def sample(pid: int, t_s: float, util_pct: float) -> dict:
    return {"pid": pid, "timeStamp": int(round(t_s * 1e6)), "smUtil": int(round(util_pct)),
            "memUtil": 0, "encUtil": 0, "decUtil": 0}


def samples_at(mode: str, index: int, t_s: float,
               jobs: Iterable[tuple[tuple[int, ...], float]]) -> list[dict]:
    """The per-process samples taken at ``t_s`` on GPU ``index`` of ``jobs`` (each one's
    processes and utilisation): time-sliced, one on each job's first process beside the
    monitoring process's 1%; under MPS, one on the server, the pool's, while a job runs."""
    jobs = list(jobs)
    if mode == "shard":
        return [sample(AGENT_PID + index, t_s, 1.0)] + [sample(pids[0], t_s, util)
                                                        for pids, util in jobs]
    return [sample(SERVER_PID + index, t_s, sum(u for _, u in jobs))] if jobs else []


def board_calls(model: str, power_w: float, energy_mj: float, mem_mib: float,
                limit_w: float) -> dict[str, Any]:
    """What a GPU of ``model`` answers of itself: its NVML name, power, energy counter,
    memory, power limit, the limit's range and default."""
    m = lookup(model)
    return {
        "nvmlDeviceGetName": m.nvml_names[0],
        "nvmlDeviceGetPowerUsage": int(round(power_w * 1000)),
        "nvmlDeviceGetTotalEnergyConsumption": int(round(energy_mj)),
        "nvmlDeviceGetMemoryInfo": {"total": int(m.memory_mib) * MIB,
                                    "used": int(round(mem_mib)) * MIB,
                                    "free": (int(m.memory_mib) - int(round(mem_mib))) * MIB},
        "nvmlDeviceGetPowerManagementLimit": int(round(limit_w * 1000)),
        "nvmlDeviceGetPowerManagementLimitConstraints":
            [int(round(m.min_power_cap_w * 1000)), int(round(m.max_power_w * 1000))],
        "nvmlDeviceGetPowerManagementDefaultLimit": int(round(m.max_power_w * 1000)),
    }


def shared_calls(mode: str, index: int, util_pct: float, clients: list[dict],
                 samples: list[dict]) -> dict[str, Any]:
    """What GPU ``index``, not in MIG mode, answers of its work: time-sliced (``"shard"``),
    the jobs' processes (``clients``) as compute processes beside a monitoring process; under
    MPS (``"mps"``), the server as the one compute process and the jobs' as its clients."""
    other = [process(AGENT_PID + index if mode == "shard" else SERVER_PID + index, "")]
    return {
        "nvmlDeviceGetMigMode": [0, 0],
        "nvmlDeviceGetUtilizationRates": {"gpu": int(round(util_pct)), "memory": 0},
        "nvmlDeviceGetProcessUtilization": samples,
        "nvmlDeviceGetComputeRunningProcesses": clients + other if mode == "shard" else other,
        "nvmlDeviceGetMPSComputeRunningProcesses": clients if mode == "mps" else [],
    }


def synthesise(gpus: Iterable[SynthGpu], *, model: str = "H100-80GB-HBM3",
               duration_s: float = 60.0, interval_s: float = 2.0, node: str = "n1",
               provenance: str = "") -> dict[str, Any]:
    """A replay file's document for ``gpus`` (by index) over ``duration_s``, one pass every
    ``interval_s`` from the start; each GPU's jobs run from their ``start_s`` to ``end_s``."""
    gpus = list(gpus)
    m = lookup(model)
    steps = round(duration_s / STEP_S)
    per_pass, per_sample = round(interval_s / STEP_S), round(SAMPLE_S / STEP_S)
    order = {id(j): k for k, j in enumerate(j for g in gpus for j in g.jobs)}
    pid_of = {j.job_id: job_pids(g.mode, order[id(j)]) for g in gpus for j in g.jobs}
    pids: dict[str, str | None] = {str(p): j for j, ps in pid_of.items() for p in ps}
    truth: dict[str, float] = {}
    passes: list[dict] = [{"t_s": T0_S + k * STEP_S, "gpus": []}
                          for k in range(0, steps + 1, per_pass)]
    for index, gpu in enumerate(gpus):
        if gpu.mode == "shard":
            pids[str(AGENT_PID + index)] = None
        if gpu.mode == "mps":
            pids[str(SERVER_PID + index)] = None
        states = [_step(gpu, index, model, node, (s + 0.5) * STEP_S) for s in range(steps)]
        for _power, _util, _mem, _utils, own in states:
            for job, p in own.items():
                truth[job] = truth.get(job, 0.0) + p * STEP_S
        samples = []                        # none in MIG mode
        for end in range(per_sample, steps + 1, per_sample) if gpu.mode != "mig" else ():
            window = states[end - per_sample:end]
            ran = [j for j in gpu.jobs if any(j.job_id in w[3] for w in window)]
            samples += samples_at(gpu.mode, index, T0_S + end * STEP_S, [
                (pid_of[j.job_id], sum(w[3].get(j.job_id, 0.0) for w in window) / per_sample)
                for j in ran])
        energy_mj = float(ENERGY_BASE_MJ)
        for k, pas in enumerate(passes):
            step = k * per_pass
            if k:
                energy_mj += sum(s[0] for s in states[step - per_pass:step]) * STEP_S * 1000
            power, util, mem, _utils, _own = states[max(0, step - 1)]
            last_t = (max(0, step - 1) + 0.5) * STEP_S
            running = [j for j in gpu.jobs if _runs(j, last_t)]
            rec = board_calls(model, power, energy_mj, mem, m.max_power_w)
            if gpu.mode == "mig":
                unsupported = {"error": "NVML_ERROR_NOT_SUPPORTED"}
                rec.update({
                    "nvmlDeviceGetMigMode": [1, 1],
                    "nvmlDeviceGetMaxMigDeviceCount": MIG_SLICES,
                    "nvmlDeviceGetUtilizationRates": unsupported,
                    "nvmlDeviceGetProcessUtilization": unsupported,
                    "mig_devices": {str(slot): {
                        "nvmlDeviceGetAttributes": {
                            "multiprocessorCount": MIG_PROFILES[n][0], "sharedCopyEngineCount": n,
                            "sharedDecoderCount": 0, "sharedEncoderCount": 0,
                            "sharedJpegCount": 0, "sharedOfaCount": 0,
                            "gpuInstanceSliceCount": n, "computeInstanceSliceCount": n,
                            "memorySizeMB": MIG_PROFILES[n][1]},
                        "nvmlDeviceGetComputeRunningProcesses": [
                            process(pid_of[j.job_id][0], j.app) for j in running
                            if j.slot == slot],
                    } for slot, n in enumerate(gpu.mig_slices)}})
            else:
                t_s = pas["t_s"]
                rec.update(shared_calls(
                    gpu.mode, index, util, [process(p, j.app) for j in running
                                            for p in pid_of[j.job_id]],
                    [s for s in samples if t_s - BUFFER_S < s["timeStamp"] / 1e6 <= t_s]))
            pas["gpus"].append(rec)
    jobs = {j.job_id: {"app": j.app, "gpus": {str(i): j.shares}}
            for i, g in enumerate(gpus) for j in g.jobs}
    return {"format": FORMAT, "provenance": provenance, "node": node, "pids": pids,
            "jobs": jobs, "passes": passes,
            "truth_j": {j: round(e, 3) for j, e in sorted(truth.items())}}


# --- the scenarios of tests/data/nvml/ and benchmarks/bench_nvml_path.py ---------------------
GROUPS = {2: ("vgg16", "alexnet"), 3: ("lstm", "resnet18", "transformer"),
          4: ("aps", "wavenet", "alexnet", "vgg16")}


def shared_gpu(apps: Iterable[str], mode: str, duration_s: float = 60.0,
               first_id: int = 101) -> SynthGpu:
    """Jobs of ``apps`` on one GPU, time-sliced (1 or 2 shards each) or under MPS (an equal
    percentage each), starting 3.5 s apart and ending 2.5 s apart."""
    apps = list(apps)
    return SynthGpu(mode, tuple(
        SynthJob(str(first_id + k), a, 1.5 + 3.5 * k, duration_s - 1.5 - 2.5 * k,
                 1 + k % 2 if mode == "shard" else 100 // len(apps))
        for k, a in enumerate(apps)))


def mig_gpu(duration_s: float = 60.0, first_id: int = 101) -> SynthGpu:
    """An H100 in MIG mode: devices of 3, 2, 1 and 1 slices, jobs on the first three."""
    apps = ("vgg16", "alexnet", "lstm")
    return SynthGpu("mig", tuple(
        SynthJob(str(first_id + k), a, 1.5 + 3.5 * k, duration_s - 1.5 - 2.5 * k, slot=k)
        for k, a in enumerate(apps)), mig_slices=(3, 2, 1, 1))


def node_of_8(duration_s: float) -> list[SynthGpu]:
    """Eight GPUs and twelve jobs for the collector's pass time: the even GPUs hold one job
    each, the odd ones two (time-sliced and MPS in turn), for the whole trace."""
    classes = ("alexnet", "aps", "lstm", "nas", "resnet18", "transformer", "vgg16", "wavenet")
    gpus = []
    for i in range(8):
        n = 2 if i % 2 else 1
        mode = "mps" if i % 4 == 3 else "shard"
        gpus.append(SynthGpu(mode, tuple(
            SynthJob(str(200 + 2 * i + k), classes[(i + k) % 8], 0.0, duration_s + 1,
                     (50 if mode == "mps" else 2) if n > 1 else 0) for k in range(n))))
    return gpus


def scenarios() -> dict[str, tuple[str, list[SynthGpu]]]:
    """The files of ``tests/data/nvml/`` by name, each with what it holds: 2, 3 and 4 jobs on
    one GPU, time-sliced and under MPS, and one GPU in MIG mode."""
    out = {}
    for mode, how in (("shard", "time-sliced, 1 or 2 shards each"),
                      ("mps", "under MPS, an equal percentage each")):
        for n in (2, 3, 4):
            out[f"h100-{mode}-{n}"] = (f"{n} jobs on one GPU ({'+'.join(GROUPS[n])}), {how}",
                                       [shared_gpu(GROUPS[n], mode)])
    out["h100-mig"] = ("one GPU in MIG mode, devices of 3+2+1+1 slices, jobs on the first three "
                       "(vgg16+alexnet+lstm)", [mig_gpu()])
    return out
