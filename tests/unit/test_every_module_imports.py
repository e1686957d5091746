"""Every module of the project imports and every template parses under the running Python.

Marked ``every_python``: scripts/test.sh runs the pure tiers once, on the host's Python, and this
again under each Debian root's newer Python (3.11 to 3.14 are supported), where a removed
standard-library name or a changed syntax rule shows up at import.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("slurm_plugin", "wrapper")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        names.extend(m.name for m in pkgutil.walk_packages(root.__path__, f"{package}."))
    return sorted(names)


MODULES = _modules()


@pytest.mark.every_python
def test_the_package_list_is_whole():
    assert len(MODULES) > 100
    assert "slurm_plugin.sim.engine" in MODULES and "wrapper.cli" in MODULES


@pytest.mark.every_python
def test_every_module_imports_in_a_fresh_interpreter():
    """One child interpreter imports them all, warnings as errors for deprecations that the
    next Python turns into removals, and names the first that fails."""
    probe = ("import importlib, sys, warnings\n"
             "warnings.simplefilter('error', DeprecationWarning)\n"
             "for name in sys.argv[1:]:\n"
             "    try:\n"
             "        importlib.import_module(name)\n"
             "    except Exception as exc:\n"
             "        sys.exit(f'{name}: {type(exc).__name__}: {exc}')\n")
    done = subprocess.run([sys.executable, "-c", probe, *MODULES], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.every_python
def test_every_template_parses():
    import jinja2

    env = jinja2.Environment()
    templates = sorted((REPO / "templates").rglob("*.j2")) + sorted(
        (REPO / "slurm_plugin").rglob("*.j2"))
    assert templates
    for path in templates:
        env.parse(path.read_text(), filename=str(path))
