"""Where the packaged data lives: ``site/`` and ``templates/``.

Installed, they are shipped inside the package as ``slurm_plugin/_site`` and
``slurm_plugin/_templates`` (see ``pyproject.toml``); in a source checkout they are the
top-level folders. (``site`` cannot be a Python package: the standard library owns the name.)
"""

from __future__ import annotations

import os

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from pathlib import Path

# os.path, not pathlib, on wattbatch's start-up path: pathlib costs ~3 ms to import.
_PKG = os.path.dirname(os.path.realpath(__file__))
_REPO = os.path.dirname(_PKG)


def _pick(installed: str, checkout: str) -> str:
    inside = os.path.join(_PKG, installed)
    return inside if os.path.isdir(inside) else os.path.join(_REPO, checkout)


def packaged_site_file(name: str) -> str:
    """A file of the packaged site defaults, as a plain path."""
    return os.path.join(_pick("_site", "site"), name)


def site_dir() -> Path:
    from pathlib import Path
    return Path(_pick("_site", "site"))


def templates_dir() -> Path:
    from pathlib import Path
    return Path(_pick("_templates", "templates"))


def data_dir() -> Path:
    """Fitted constants and the small built-in data slice shipped with the package."""
    from pathlib import Path
    return Path(_PKG) / "data"
