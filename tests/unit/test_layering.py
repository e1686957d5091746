"""The brain stays pure: policy/ and physics/ import nothing from the adapters or the simulator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "slurm_plugin"
FORBIDDEN = ("slurm", "telemetry", "node", "sim", "localcluster", "commands", "live",
             "reconcile", "proc")


def imported_modules(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out += [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted((PKG / "policy").rglob("*.py"))
                         + sorted((PKG / "physics").glob("*.py")),
                         ids=lambda p: str(p.relative_to(PKG)))
def test_pure_layers_import_no_adapter(path):
    bad = [m for m in imported_modules(path)
           if any(m.lstrip(".").split(".")[0] == f or m.startswith(f"slurm_plugin.{f}")
                  or m.startswith(f"..{f}") for f in FORBIDDEN)]
    assert bad == [], f"{path.name} imports {bad}: policies and physics must stay pure"


ADAPTERS = ("telemetry", "slurm", "node")


@pytest.mark.parametrize("path", [p for a in ADAPTERS for p in sorted((PKG / a).rglob("*.py"))],
                         ids=lambda p: str(p.relative_to(PKG)))
def test_no_adapter_imports_a_policy(path):
    """Adapters are thin: what a policy's own keys mean is read by reports and shells."""
    bad = [m for m in imported_modules(path)
           if m.startswith("..policy") or m.startswith("slurm_plugin.policy")
           or m.startswith("...policy")]
    assert bad == [], f"{path.relative_to(PKG)} imports {bad}: no adapter imports a policy"


def test_checker_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("from ..slurm.actions import cancel\n")
    assert "..slurm.actions" in imported_modules(bad)


SOURCES = sorted(PKG.rglob("*.py")) + sorted((PKG.parent / "wrapper").rglob("*.py"))


def test_every_subprocess_goes_through_proc():
    """One function runs commands (argv lists, errors that show command, exit code and
    stderr): no other module imports subprocess."""
    users = [str(p.relative_to(PKG.parent)) for p in SOURCES
             if p != PKG / "proc.py" and any(m.split(".")[0] == "subprocess"
                                              for m in imported_modules(p))]
    assert users == []


# proc is not an adapter: the one way to run a command (a sweep submits its cells with it)
LIVE = ("slurm", "telemetry", "node", "localcluster", "commands", "live", "reconcile")


@pytest.mark.parametrize("path", sorted((PKG / "sim").rglob("*.py"))
                         + sorted((PKG / "formats").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PKG)))
def test_simulator_and_shared_readers_import_no_live_adapter(path):
    """The simulator replays what the live path does through the same policy code, without
    Slurm, InfluxDB or NVML; the readers both use (``formats/``) belong to neither side."""
    bad = [m for m in imported_modules(path)
           if any(m.startswith(f"..{a}") or m.startswith(f"slurm_plugin.{a}")
                  or m.startswith(f"...{a}") or (path.parent.name == "formats"
                                                 and m.startswith(f".{a}"))
                  for a in LIVE)]
    assert bad == [], f"{path.relative_to(PKG)} imports {bad}: no live adapter in sim/ or formats/"
