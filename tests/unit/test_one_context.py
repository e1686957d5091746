"""The wrapper, the reconciler and the simulator hand a policy the same settings for one site
config (``config.policy_settings``): a spy policy, and a spy stack, record what each shell
gave them. The simulator's own cluster fixes only its shards per GPU."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from slurm_plugin import config
from slurm_plugin.cli import group as wattctl
from slurm_plugin.model import Cluster, Gpu, Node, Placement, Readings
from slurm_plugin.policy import registry
from wrapper.cli import Io, Providers, run

SEEN: list[tuple[str, dict]] = []
CLUSTER = Cluster(nodes=(Node("gpu1", gpus=tuple(
    Gpu("gpu1", i, gres_type=f"g{i}", shards_total=4) for i in range(4))),))


class Spy:
    name = "test-spy"

    def advise(self, request, ctx):
        SEEN.append(("advise", dict(ctx.settings)))
        return Placement(self.name, request.gpus, why=("spied",))

    def reconcile(self, ctx):
        SEEN.append(("reconcile", dict(ctx.settings)))
        return ()


registry.register("test-spy", Spy, ("timing",))


@pytest.fixture
def site(tmp_path, monkeypatch):
    f = tmp_path / "site.toml"
    f.write_text('[policy]\nallow_share = true\n[slurm]\nshards_per_gpu = 8\n'
                 f'[reconcile]\nstate_dir = "{tmp_path}"\n')
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(f))
    (tmp_path / "job.sh").write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
    monkeypatch.chdir(tmp_path)
    SEEN.clear()
    return f


@pytest.mark.parametrize("name", ["test-spy", "test-spy+pal"])
def test_wrapper_reconciler_and_simulator_build_the_same_settings(site, monkeypatch, name):
    cfg = config.load()
    want = config.policy_settings(cfg, name)
    spy = (lambda s: s["stage_settings"]["test-spy"]) if "+" in name else (lambda s: s)

    prov = Providers(snapshot=lambda cfg: CLUSTER,
                     readings=lambda cfg, c, now, carbon: Readings())
    environ = {"WATTBATCH_SITE_CONFIG": str(site), "WATTBATCH_SERVER": "0"}
    run([f"--wb-policy={name}", "--wb-dry-run", "job.sh"],
        Io(environ, io.BytesIO(b""), io.StringIO(), io.StringIO()), prov, now_s=1000.0)
    assert SEEN[-1] == ("advise", dict(spy(want)))

    monkeypatch.setattr("slurm_plugin.live.snapshot", lambda cfg: CLUSTER)
    monkeypatch.setattr("slurm_plugin.live.readings", lambda cfg, c=None, carbon=True: Readings())
    r = CliRunner().invoke(wattctl, ["reconcile", "--dry-run", "--policy", name, "--json"])
    assert r.exit_code == 0, r.output
    assert SEEN[-1] == ("reconcile", dict(spy(want)))

    given = []
    monkeypatch.setattr("slurm_plugin.commands.simulate.run_one",
                        lambda inputs, n, settings, **kw: given.append(settings) or {})
    CliRunner().invoke(wattctl, ["simulate", "--policy", name, "--limit-jobs", "5",
                                 "--nodes", "2", "--json"])
    assert given, "the simulator was not run"
    assert spy(given[0]) == {**spy(want), "shards_per_gpu": 4}   # the simulated cluster's
    assert spy(want)["allow_share"] is True and spy(want)["shards_per_gpu"] == 8


def _golden(golden_dir, release: str) -> Cluster:
    from slurm_plugin.slurm.snapshot import build_cluster
    d = golden_dir / "slurm" / release
    return build_cluster(json.loads((d / "nodes.json").read_text()),
                         json.loads((d / "squeue.json").read_text()), "wattbatch", 1000.0)


@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
@pytest.mark.parametrize("name", ["eaco", "pal+eaco+greenflow+elastic"])
def test_the_wrapper_decides_as_the_policy_does_on_a_recorded_snapshot(site, golden_dir,
                                                                         release, name):
    """The wrapper's decision for a job on a recorded snapshot of each release is the policy's
    own, given the settings the one builder makes (what the reconciler and the simulator hand
    it too)."""
    from slurm_plugin.history import read_view
    from slurm_plugin.policy.base import Context
    from wrapper.request import build_request
    from wrapper.sbatch_args import parse_command_line, parse_script
    from wrapper.request import merge
    from wrapper.wb_options import resolve, takes_value

    cluster = _golden(golden_dir, release)
    argv = [f"--wb-policy={name}", "--wb-app=resnet18", "--wb-share", "--wb-explain",
            "--wb-dry-run", "-t", "60", "job.sh"]
    out, err = io.StringIO(), io.StringIO()
    run(argv, Io({"WATTBATCH_SITE_CONFIG": str(site), "WATTBATCH_SERVER": "0"},
                 io.BytesIO(b""), out, err),
        Providers(snapshot=lambda cfg: cluster, readings=lambda cfg, c, now, carbon: Readings()),
        now_s=1000.0)
    said = [ln.removeprefix("# ").removeprefix("wattbatch: ").removeprefix("explain: ").strip()
            for ln in (out.getvalue() + err.getvalue()).splitlines()]

    cfg = config.load()
    cmd = parse_command_line(argv, takes_value)
    script = (site.parent / "job.sh").read_text()
    header = parse_script(script)
    view = merge(cmd.uses, header.uses, {})
    wb = resolve(cmd.wb_words, header.wb_lines, {})
    request = build_request(view, wb, script="job.sh", now_s=1000.0, environ={})
    placement = registry.get_policy(name).advise(request, Context(
        cluster=cluster, readings=Readings(), now_s=1000.0,
        settings=config.policy_settings(cfg, name),
        history=read_view(cfg["reconcile.state_dir"])))
    assert placement.why and all(w in said for w in placement.why), (placement.why, said)
    assert f"policy {name}" in said
