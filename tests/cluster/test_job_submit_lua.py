"""contrib/slurm/job_submit.lua runs inside the local cluster's slurmctld: it records the
submitter, the declared class and wattbatch's tag in AdminComment, takes that tag out of the
comment (the job keeps the comment its user gave), and a later change of the comment does not
change what was recorded."""

from __future__ import annotations

import pytest

from slurm_plugin.proc import run
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.snapshot import snapshot

pytestmark = pytest.mark.cluster


RECORD = "wb:uid=0;declared_app=bert;tagged=1;policy=eaco;share=shard:2"


def test_admin_comment_records_the_declaration_at_submission(localcluster, tmp_path):
    cfg = localcluster.config()
    tagged = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold",
                             "--comment=wb:policy=eaco;app=bert;share=shard:2"],
                            "#!/bin/bash\ntrue\n", cfg)
    mixed = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold",
                            "--comment=my app=lstm run wb:policy=slurm-default;app=bert"],
                           "#!/bin/bash\ntrue\n", cfg)
    plain = actions.submit(["--output=/dev/null", f"--chdir={tmp_path}", "--hold"],
                           "#!/bin/bash\ntrue\n", cfg)
    shown = actions.show_job(tagged, cfg)
    assert shown["AdminComment"] == RECORD
    assert snapshot(cfg).jobs[tagged].app == "bert"       # what reconcile's policies see
    assert "Comment" not in shown                         # the user gave none
    shown_mixed = actions.show_job(mixed, cfg)
    comment = run(["squeue", "-h", "-j", mixed, "-O", "Comment:200"], env=localcluster.env)
    assert comment.stdout.strip() == "my app=lstm run"    # the user's own, as given
    assert shown_mixed["AdminComment"] == \
        "wb:uid=0;declared_app=bert;tagged=1;policy=slurm-default"
    assert actions.show_job(plain, cfg)["AdminComment"] == "wb:uid=0;declared_app=;tagged=0"
    # the user changes the comment afterwards: the record at submission stays
    run(["scontrol", "update", f"jobid={tagged}", "Comment=app=lstm"], env=localcluster.env)
    shown = actions.show_job(tagged, cfg)
    assert shown["Comment"] == "app=lstm"
    assert shown["AdminComment"] == RECORD
    assert snapshot(cfg).jobs[tagged].app == "bert"       # what reconcile's policies see
