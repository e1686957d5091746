"""``wattctl report``: per-job GPU energy and carbon over a period, grouped, with what the same
jobs would have cost on exclusive GPUs. ``period`` reads Slurm's time formats, ``records`` the
``job_energy`` points, ``aggregate`` is the pure arithmetic, ``daily`` and ``plot`` the figure."""
