"""Shared test settings: where golden files live. Tiers are chosen by directory and marker
(``cluster`` tests need the real local cluster; see tests/cluster/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


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
