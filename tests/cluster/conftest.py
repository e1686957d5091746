"""Real-cluster tier: every test here is marked ``cluster``.

The ``localcluster`` fixture brings the local Slurm + InfluxDB cluster up (idempotent; state
dir from ``$WATTBATCH_LOCALCLUSTER_DIR`` or /var/tmp/wattbatch-localcluster), exports
``SLURM_CONF`` and ``WATTBATCH_SITE_CONFIG`` for the session and cancels every job after each
test that uses it (and before). If ``up`` fails the tests fail with its error: they never skip silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from slurm_plugin import config
from slurm_plugin.localcluster import Spec, cancel_all_jobs, resolve, up


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """The parity suite's count of identical cases and the crash matrix's tally, printed
    after every run."""
    from cluster_waits import CRASH_RUNAWAY, CRASH_TALLY
    from parity_cases import SUMMARY
    for line in config.stash.get(SUMMARY, []):
        terminalreporter.write_line(line)
    cases = config.stash.get(CRASH_TALLY, [])
    if cases:
        from slurm_plugin.proc import run
        release = run(["sinfo", "--version"], check=False).stdout.strip()
        counts = [sum(c[i] for c in cases) for i in (3, 4, 5)]
        before = sum(c[1] == "ctld-before-save" for c in cases)
        terminalreporter.write_line(
            f"crash matrix on {release}: {len(cases)} cases "
            f"({before} with slurmctld killed before it saved), jobs lost {counts[0]}, "
            f"left held {counts[1]}, tracebacks {counts[2]}; accounting records of lost "
            f"requeues left open (runaway jobs, closed after): "
            f"{config.stash.get(CRASH_RUNAWAY, 'not counted')}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.cluster)


@dataclass(frozen=True)
class LocalCluster:
    spec: Spec
    state_dir: Path
    slurm_conf: Path
    site_toml: Path
    influx_url: str
    influx_database: str
    env: dict[str, str]

    def config(self) -> config.SiteConfig:
        """The wattbatch site config of the local cluster."""
        return config.load(self.site_toml)

    def influx(self, database: str, timeout_s: float = 10.0):
        """An InfluxDB client of this cluster's server (with its credentials) on ``database``."""
        from slurm_plugin.telemetry.influx import InfluxClient

        cfg = self.config()
        return InfluxClient(cfg["influx.url"], database, username=cfg["influx.username"],
                            password=cfg["influx.password"], token=cfg["influx.token"],
                            timeout_s=timeout_s)

    def cancel_all_jobs(self) -> int:
        return cancel_all_jobs(self.spec)


@pytest.fixture(scope="session")
def localcluster():
    spec = resolve()
    up(spec)     # raises CommandError with the daemon's log tail: the tests error, not skip
    patch = pytest.MonkeyPatch()
    for name, value in spec.env().items():
        patch.setenv(name, value)
    cluster = LocalCluster(spec=spec, state_dir=spec.state_dir, slurm_conf=spec.slurm_conf,
                           site_toml=spec.site_toml, influx_url=spec.influx_url,
                           influx_database=spec.influx_database, env=spec.env())
    cluster.cancel_all_jobs()
    yield cluster
    cluster.cancel_all_jobs()
    patch.undo()


@pytest.fixture(scope="module")
def session_down(localcluster):
    """The session's cluster down for a module that runs clusters of its own
    (``cluster_waits.own_cluster``), and up again after it."""
    from slurm_plugin.localcluster import down
    down(localcluster.spec, cancel_jobs=True)
    try:
        yield localcluster
    finally:
        up(localcluster.spec, install=False)


@pytest.fixture(autouse=True)
def _no_jobs_around_test(request: pytest.FixtureRequest):
    """Tests that use the cluster start and end with no jobs (also those left by tests that
    submitted without the fixture)."""
    cluster = request.getfixturevalue("localcluster") \
        if "localcluster" in request.fixturenames else None
    if cluster is not None:
        cluster.cancel_all_jobs()
    yield
    if cluster is not None:
        cluster.cancel_all_jobs()
