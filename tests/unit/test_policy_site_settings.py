"""Every registered policy takes the settings the live paths hand it: ``wattctl reconcile``
gives ``config.policy_settings`` (the ``[policy]`` keys and the policy's section), wattbatch
adds the site's sharing facts. A policy that checks its own keys strictly must pass over
these; one that did not failed every live pass with "unknown key: name"."""

from __future__ import annotations

import pytest

from slurm_plugin import config
from slurm_plugin.model import Cluster, Gpu, Job, JobRequest, Node, Readings
from slurm_plugin.policy.base import Context
from slurm_plugin.policy.registry import get_policy, policy_names

CLUSTER = Cluster(nodes=(Node("gpu1", gpus=tuple(Gpu("gpu1", i) for i in range(4))),),
                  jobs={"1": Job("1", "PENDING", gpus=1, submit_s=0.0)}, taken_s=100.0)


@pytest.mark.parametrize("name", [n for n in policy_names() if not n.startswith("test-")])
def test_live_settings_are_accepted(name):
    cfg = config.load(site_file=None, environ={})
    live = dict(config.policy_settings(cfg, name))
    wrapper = {**live, "share_gres": "shard", "shards_per_gpu": 4, "typed_gpus": True}
    policy = get_policy(name)
    policy.reconcile(Context(cluster=CLUSTER, readings=Readings(), now_s=100.0, settings=live))
    get_policy(name).advise(JobRequest(name="j", gpus=1), Context(
        cluster=CLUSTER, readings=Readings(), now_s=100.0, settings=wrapper))
