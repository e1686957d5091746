"""``ones``: evolutionary batch-size and GPU-share orchestration (ONES, SC'21) on the elastic
jobs' resize path. Roles: ``predict`` (fitted step-time model and each job's goodput at a GPU
count and batch size), ``observe`` (each job's progress, checked), ``decide`` (the population
of cluster schedules, advise and reconcile), ``settings`` (the ``[ones]`` site keys). See
docs/ones.md."""
