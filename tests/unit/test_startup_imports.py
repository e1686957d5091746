"""wattbatch runs once per submission, so what it imports is its latency (goal: <= 50 ms over
sbatch, measured by benchmarks/bench_wattbatch.py). This pins the modules it must not load on
the default path once its site-config cache is warm; each cost 2-15 ms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("dataclasses", "inspect", "typing", "tomllib", "pathlib", "jinja2", "click", "tempfile",
         "threading", "msgspec")
PROBE = f"""
import json, sys
sys.argv = ["wattbatch", "--wb-dry-run", sys.argv[1]]
from wrapper.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)) + "\\n")
"""


def test_default_submission_path_loads_no_heavy_module(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
           "WATTBATCH_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    loaded = []
    for _ in range(2):                      # the first run fills the site-config cache
        done = subprocess.run([sys.executable, "-c", PROBE, str(script)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        loaded.append(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "tomllib" in loaded[0]           # parsed once...
    assert loaded[1] == []                  # ...then nothing heavy
