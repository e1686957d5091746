"""``elastic``: progress-driven GPU counts for elastic jobs (SC'20 non-intrusive elastic
scheduling on Slurm's checkpoint-aware requeue). Roles: ``predict`` (throughput and remaining
time of a job on n GPUs), ``observe`` (its progress, checked), ``track`` (the running jobs
from pass to pass), ``plan`` (waits, victims, growths on a free-GPU map), ``decide`` (advise
and reconcile), ``settings`` (the ``[elastic]`` site keys). See docs/elastic.md."""
