"""wattbatch installed as ``sbatch`` for the real-cluster tests: the shim of contrib/sbatch/
(with this environment's wattbatch) in a directory put first on PATH. The installed wattbatch
runs, so reinstall (``pip install --no-deps .``) after changing the code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

WATTBATCH = Path(sys.executable).parent / "wattbatch"
CONTRIB_SHIM = Path(__file__).resolve().parents[2] / "contrib" / "sbatch" / "sbatch"


def make_shim(directory: Path) -> Path:
    """``directory/sbatch``: contrib's shim, pointed at this environment's wattbatch."""
    assert WATTBATCH.exists(), f"{WATTBATCH} missing: install wattbatch into this environment"
    directory.mkdir(parents=True, exist_ok=True)
    text = CONTRIB_SHIM.read_text().replace("/opt/wattbatch/venv/bin/wattbatch", str(WATTBATCH))
    assert str(WATTBATCH) in text, "contrib/sbatch/sbatch no longer names the install path"
    shim = directory / "sbatch"
    shim.write_text(text)
    shim.chmod(0o755)
    return shim


def env_with_shim(directory: Path, **extra: str) -> dict[str, str]:
    """This process's environment with the shim first on PATH, no bin-dir setting at all."""
    env = {k: v for k, v in os.environ.items() if k != "WATTBATCH_SLURM_BIN_DIR"}
    env["PATH"] = f"{directory}{os.pathsep}{env.get('PATH', os.defpath)}"
    env.update(extra)
    return env
