"""The kinds of the simulator's timed events (the engine's heap, ``Simulator._push``) and its
time tolerance, shared by the parts of the engine that schedule and handle them."""

# a job's work done (at its rate then), a --begin time passing, a node's boot done, a node
# idle long enough to power down, a reconcile pass, a backfill tick, a job's time limit
FINISH, BEGIN, BOOTED, SUSPEND, RECONCILE, BACKFILL, TIMEOUT = range(7)
EPS = 1e-9      # seconds: times this close are one time
