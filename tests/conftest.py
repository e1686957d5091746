"""Shared test settings: where golden files live, and which tier a run takes.

Tiers are chosen by directory (``cluster`` tests need the real local cluster; see
tests/cluster/conftest.py). ``WATTBATCH_TEST_TIER`` narrows a run to one side, so that
scripts/test.sh runs the pure tiers once and only the real-cluster tier once per Slurm release:

- ``pure``: everything outside tests/cluster;
- ``cluster``: tests/cluster, and the pure tests marked ``every_python`` (those that say
  something about the interpreter itself, run again under each Debian root's Python);
- unset or empty: everything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"
CLUSTER_DIR = Path(__file__).parent / "cluster"
TIERS = ("pure", "cluster")


def in_tier(tier: str, path: Path, every_python: bool) -> bool:
    """Whether a test at ``path`` runs in ``tier`` (see the module docstring)."""
    if not tier:
        return True
    in_cluster = CLUSTER_DIR in path.parents
    return not in_cluster if tier == "pure" else in_cluster or every_python


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = os.environ.get("WATTBATCH_TEST_TIER", "")
    if tier and tier not in TIERS:
        raise pytest.UsageError(f"WATTBATCH_TEST_TIER={tier!r}: choose one of {', '.join(TIERS)} "
                                "or leave it unset for every tier")
    kept, dropped = [], []
    for item in items:
        every_python = item.get_closest_marker("every_python") is not None
        (kept if in_tier(tier, Path(item.fspath), every_python) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN_DIR


@pytest.fixture(scope="session", autouse=True)
def _config_cache_in_a_temporary_dir(tmp_path_factory):
    """Site-config parse caches of the tests (and of the commands they run) stay out of the
    user's ~/.cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path_factory.mktemp("config-cache")))
    yield
    patch.undo()


@pytest.fixture()
def utc(monkeypatch):
    """Local time in UTC for the duration of a test (sacct prints local time; the golden
    files were recorded in UTC)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
