"""wattbatch: energy-, carbon- and variability-aware scheduling for Slurm GPU clusters.

The brain (``policy/``, ``physics/``) is pure; ``slurm/``, ``telemetry/`` and ``node/`` are
thin adapters; ``sim/`` is a second body that drives the same policies on a trace.
"""

__version__ = "0.1.0"
