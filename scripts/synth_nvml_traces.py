"""Write the NVML replay files of tests/data/nvml/, synthesised from the emulated physics
(``slurm_plugin/node/nvml_synth.py``): 2, 3 and 4 jobs on one H100, time-sliced and under MPS,
and one H100 in MIG mode, 60 s with a pass every 2 s.

    .venv/bin/python scripts/synth_nvml_traces.py [--out tests/data/nvml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # the checkout's package, not an installed copy
from slurm_plugin.node.nvml_replay import dumps  # noqa: E402
from slurm_plugin.node.nvml_synth import scenarios, synthesise  # noqa: E402

MODEL = "H100-80GB-HBM3"


def provenance(what: str) -> str:
    return (f"synthesised from the emulated physics (slurm_plugin/node/emulated.py gpu_state, "
            f"model {MODEL}), not recorded on a GPU: {what}; 60 s, a pass every 2 s; truth_j "
            "is each job's own power integrated over 0.5 s steps; written by "
            "scripts/synth_nvml_traces.py")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "nvml"),
                    help="folder to write the files to")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (what, gpus) in scenarios().items():
        path = out / f"{name}.json"
        path.write_text(dumps(synthesise(gpus, model=MODEL, provenance=provenance(what))))
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
