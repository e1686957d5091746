"""Rows of a Pollux (OSDI'21) workload file: ``name,time,application,num_replicas,batch_size``.

- ``name``: the job id (unique in the file); ``time``: submission, seconds from the start;
- ``num_replicas``: the GPUs the job asks for (what a static scheduler gives it);
- ``application``: one of the profiled applications (``physics/pollux.py``); ``batch_size``: its
  global batch size at ``num_replicas`` GPUs (the local batch ``batch_size / num_replicas``
  stays per GPU when the job is resized);
- the job is elastic between 1 GPU and its profile's maximum (``ElasticProfile.max_gpus``:
  the most GPUs whose global batch stays within the measured batch sizes, at least
  ``num_replicas``); its length is its samples to target over its throughput on
  ``num_replicas`` GPUs;
- its batch size may be changed (``ones``) within its application's measured global batch
  sizes (``physics/pollux_batch.py``);
- its time limit (Slurm's, which a requeue restarts) covers a run on its minimum: the whole
  minutes of ``LIMIT_FACTOR`` x its length on 1 GPU (an elastic job's contract: it may be
  given its minimum at any time, so it asks for the limit of that run).
"""

from __future__ import annotations

from ..errors import InputError
from ..physics.pollux import elastic_profile, pollux_apps
from ..physics.pollux_batch import measured_batch_range
from .trace import TraceJob

LIMIT_FACTOR = 1.25


def pollux_row(row, seen: set[str]) -> TraceJob:
    rec = row.rec
    name = row.unique("name", seen, "give each job a unique name")
    app = (rec.get("application") or "").strip().lower()
    if app not in pollux_apps():
        raise row.fail("application", f"{app!r} has no profile; "
                                      f"use one of: {', '.join(pollux_apps())}")
    submit = row.num("time", minimum=0)
    gpus = row.num("num_replicas", int, minimum=1)
    batch = row.num("batch_size", int, minimum=1)
    if batch < gpus:
        raise row.fail("batch_size", f"{batch} is smaller than num_replicas {gpus}; "
                                     "give the global batch size (at least one sample per GPU)")
    try:
        prof = elastic_profile(app, batch, gpus)
    except InputError as exc:    # not reached for a listed application
        raise row.fail("application", str(exc)) from None
    return TraceJob(job_id=name, submit_s=submit, duration_s=prof.duration_s(gpus),
                    num_gpus=gpus, line=row.line, app=app, min_gpus=1,
                    time_limit_s=60.0 * -(-LIMIT_FACTOR * prof.duration_s(1) // 60),
                    max_gpus=prof.max_gpus, speedup=prof.speedup(),
                    samples=prof.samples, batch_size=batch,
                    min_batch_size=measured_batch_range(app)[0],
                    max_batch_size=measured_batch_range(app)[1])
