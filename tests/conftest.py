"""Shared test settings: where golden files live. Tiers are chosen by directory and marker
(``cluster`` tests need the real local cluster; see tests/cluster/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN_DIR
