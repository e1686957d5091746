"""The local cluster's InfluxDB runs with authentication; every wattbatch component reaches it
with the site config's credentials, and nobody without them."""

from __future__ import annotations

import time

import pytest

from slurm_plugin.errors import TelemetryError
from slurm_plugin.telemetry.influx import InfluxClient
from slurm_plugin.telemetry.lineproto import Point
from slurm_plugin.telemetry.readers import latest_gpu_readings

pytestmark = pytest.mark.cluster


def test_influx_needs_the_site_credentials(localcluster):
    cfg = localcluster.config()
    assert cfg["influx.username"] and cfg["influx.password"]
    anonymous = InfluxClient(cfg["influx.url"], cfg["influx.database"], timeout_s=5)
    with pytest.raises(TelemetryError, match=r"HTTP 401.*influx.username/influx.password"):
        anonymous.write([Point("job_progress", {"job_id": "1"}, {"step": 1})])
    wrong = InfluxClient(cfg["influx.url"], cfg["influx.database"], username="wattbatch",
                         password="wrong", timeout_s=5)
    with pytest.raises(TelemetryError, match="HTTP 401"):
        wrong.query("SHOW MEASUREMENTS")
    # the collector (a separate process, site config) writes with them
    client = InfluxClient.from_config(cfg)
    since = time.time()
    deadline = time.monotonic() + 20
    while not [r for r in latest_gpu_readings(client, time.time()).values() if r.taken_s > since]:
        assert time.monotonic() < deadline, "no GPU reading written with the credentials"
        time.sleep(1)
    assert oct(localcluster.site_toml.stat().st_mode & 0o777) == "0o600"
