"""Where the packaged data lives: ``site/`` and ``templates/``.

Installed, they are shipped inside the package as ``slurm_plugin/_site`` and
``slurm_plugin/_templates`` (see ``pyproject.toml``); in a source checkout they are the
top-level folders. (``site`` cannot be a Python package: the standard library owns the name.)
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent


def _pick(installed: str, checkout: str) -> Path:
    inside = _PKG / installed
    return inside if inside.is_dir() else _REPO / checkout


def site_dir() -> Path:
    return _pick("_site", "site")


def templates_dir() -> Path:
    return _pick("_templates", "templates")


def data_dir() -> Path:
    """Fitted constants and the small built-in data slice shipped with the package."""
    return _PKG / "data"
