"""The wrapper, the reconciler and the simulator hand a policy the same settings for one site
config (``config.policy_settings``): a spy policy, and a spy stack, record what each shell
gave them. The simulator's own cluster fixes only its shards per GPU."""

from __future__ import annotations

import io
from types import MappingProxyType

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
