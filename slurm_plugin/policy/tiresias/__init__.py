"""``tiresias``: discretized two-dimensional least-attained-service scheduling (Tiresias,
NSDI'19), the baseline of ``ones``. Roles: ``observe`` (attained GPU-seconds), ``decide``
(priority queues, preemption), ``settings`` (the ``[tiresias]`` site keys). See docs/ones.md."""
