"""contrib/slurm/job_submit.lua runs inside the local cluster's slurmctld: it records the
submitter and the declared class in AdminComment, leaves the user's comment alone, and a
later change of the comment does not change what was recorded."""

from __future__ import annotations

import pytest

from slurm_plugin.proc import run
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster


def test_admin_comment_records_the_declaration_at_submission(localcluster, tmp_path):
    cfg = localcluster.config()
    tagged = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold",
                             "--comment=wb:policy=eaco;app=bert"], "#!/bin/bash\ntrue\n", cfg)
    plain = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold"],
                           "#!/bin/bash\ntrue\n", cfg)
    shown = actions.show_job(tagged, cfg)
    assert shown["AdminComment"] == "wb:uid=0;declared_app=bert;tagged=1"
    assert snapshot(cfg).jobs[tagged].app == "bert"       # what reconcile's policies see
    assert shown["Comment"] == "wb:policy=eaco;app=bert"          # untouched
    assert actions.show_job(plain, cfg)["AdminComment"] == "wb:uid=0;declared_app=;tagged=0"
    # the user changes the comment afterwards: the record at submission stays
    run(["scontrol", "update", f"jobid={tagged}", "Comment=app=lstm"], env=localcluster.env)
    shown = actions.show_job(tagged, cfg)
    assert shown["Comment"] == "app=lstm"
    assert shown["AdminComment"] == "wb:uid=0;declared_app=bert;tagged=1"
    assert snapshot(cfg).jobs[tagged].app == "bert"       # what reconcile's policies see
