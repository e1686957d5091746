"""The site's own GPU model file (physics/site_models.py, site key physics.site_gpu_models):
its constants win over the shipped catalogue's, the shipped file stays as it is, and a file that
does not parse is named with the key and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_plugin import config
from slurm_plugin.errors import ConfigError
from slurm_plugin.physics import gpu_models as gm
from slurm_plugin.physics.constants import gpu_constants
from slurm_plugin.physics.site_models import (SITE_KEY, site_document, write_site_document)

H100 = "H100-80GB-HBM3"


@pytest.fixture(autouse=True)
def _site_models_reset():
    """Every test starts and ends with the site config's file unresolved (caches cleared)."""
    gm.use_site_models(None)
    gpu_constants.cache_clear()
    yield
    gm.use_site_models(None)
    gpu_constants.cache_clear()


def _rec(value, source="measured") -> dict:
    return {"value": value, "source": source, "how": "test"}


def _site(tmp_path: Path, models: dict, name: str = "site-gpus.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"models": models}))
    return p


def test_site_constants_win_and_the_rest_is_the_shipped_catalogues(tmp_path):
    shipped_text = (Path(gm.__file__).parent.parent / "data" / "gpu_models.json").read_text()
    before = gm.lookup("H100")
    assert before.idle_power_w == 72.5
    p = _site(tmp_path, {"nvidia h100 80gb hbm3": {"idle_power_w": _rec(80.0),
                                                   "util_gamma": _rec(1.1)}})
    gm.use_site_models(str(p))
    m = gm.lookup("H100")
    assert (m.idle_power_w, m.util_gamma) == (80.0, 1.1)
    assert m.constant("idle_power_w") == _rec(80.0)
    assert m.dynamic_power_w == before.dynamic_power_w and m.aliases == before.aliases
    assert gm.lookup("A100").idle_power_w == gm.shipped()["models"]["A100-SXM4-80GB"][
        "idle_power_w"]["value"]
    assert gm.power_at_util_w("H100", 100) == pytest.approx(80.0 + before.dynamic_power_w)
    assert gpu_constants("H100")["idle_power_w"] == 80.0            # what the physics uses
    assert gm.shipped()["models"][H100]["idle_power_w"]["value"] == 72.5
    assert (Path(gm.__file__).parent.parent / "data" / "gpu_models.json").read_text() \
        == shipped_text
    gm.use_site_models("")
    assert gm.lookup("H100").idle_power_w == 72.5


def test_the_site_config_names_the_file(tmp_path, monkeypatch):
    p = _site(tmp_path, {H100: {"max_power_w": _rec(650.0)}})
    site = tmp_path / "site.toml"
    site.write_text(f'[physics]\nsite_gpu_models = "{p}"\n')
    monkeypatch.setenv("WATTBATCH_SITE_CONFIG", str(site))
    gm.use_site_models(None)
    assert gm.site_models_file() == (str(p), str(site))
    assert gm.lookup("H100").max_power_w == 650.0
    monkeypatch.setenv("WATTBATCH_PHYSICS_SITE_GPU_MODELS", "")
    gm.use_site_models(None)
    assert gm.lookup("H100").max_power_w == 700.0
    assert config.load()[SITE_KEY] == ""


@pytest.mark.parametrize("text, key, value, fix", [
    ('{"models": {"H100": {"idle_power_w": {"value": 80, "source": "measured"}}', "line 1 "
     "column 74", '{"models": {"H100": {"idle_power_w": {"value": 80, "source": "measured"}}',
     "not JSON"),
    ('{"models": {"H300": {}}}', "models.H300", "H300", "not a catalogued GPU model"),
    ('{"models": {"H100": {"idle_power": {"value": 1, "source": "measured"}}}}',
     "models.H100.idle_power", {"value": 1, "source": "measured"}, "not a constant"),
    ('{"models": {"H100": {"idle_power_w": {"value": -3, "source": "measured"}}}}',
     "models.H100.idle_power_w.value", -3, "expected a finite number above 0"),
    ('{"models": {"H100": {"idle_power_w": {"value": "70", "source": "measured"}}}}',
     "models.H100.idle_power_w.value", "70", "expected a finite number above 0"),
    ('{"models": {"H100": {"cap_beta": {"value": 0.9, "source": "guessed"}}}}',
     "models.H100.cap_beta.source", "guessed", "choose one of: measured"),
    ('{"models": {"H100": {"min_power_cap_w": {"value": 900, "source": "measured"}}}}',
     "models.H100.min_power_cap_w.value", 900, "min_power_cap_w 900 is above max_power_w 700"),
    ('{"models": []}', "models", [], "expected an object of GPU model entries"),
    ('{"models": {"H100": {"interference_k_mps": {"value": -0.1, "source": "measured"}}}}',
     "models.H100.interference_k_mps.value", -0.1, "expected a finite number of at least 0"),
    ('{"models": {"H100": {"colocation_pairs": {"value": {"aps|aps": [0.8, 1.6]}, '
     '"source": "measured"}}}}', "models.H100.colocation_pairs.value.aps|aps", [0.8, 1.6],
     "each above 0 and at most 1.5"),
    ('{"models": {"H100": {"colocation_pairs": {"value": {"aps": [0.8, 0.8]}, '
     '"source": "measured"}}}}', "models.H100.colocation_pairs.value.aps", [0.8, 0.8],
     "a pair \"a|b\""),
    ('{"models": {"H100": {"colocation_pairs": {"value": [0.8], "source": "measured"}}}}',
     "models.H100.colocation_pairs.value", [0.8], "expected {\"a|b\""),
    ('{"models": {"H100": {}, "h100-sxm": {}}}', "models.h100-sxm", "h100-sxm",
     "names H100-80GB-HBM3 again"),
])
def test_a_file_that_does_not_parse_names_the_file_the_key_and_the_value(tmp_path, text, key,
                                                                           value, fix):
    p = tmp_path / "bad.json"
    p.write_text(text)
    gm.use_site_models(str(p), "/etc/wattbatch/site.toml")
    with pytest.raises(ConfigError) as exc:
        gm.lookup("H100")
    e = exc.value
    assert (e.source, e.key, e.value) == (str(p), key, value)
    assert fix in e.fix and str(p) in str(e)


def test_a_path_that_cannot_be_read_is_blamed_on_where_the_key_was_set(tmp_path):
    gm.use_site_models(str(tmp_path / "none.json"), "/etc/wattbatch/site.toml")
    assert gm.lookup("H100").idle_power_w == 72.5        # not written yet: the shipped entry
    gm.use_site_models(str(tmp_path), "/etc/wattbatch/site.toml")
    with pytest.raises(ConfigError, match=r"config: /etc/wattbatch/site.toml: "
                       r"physics.site_gpu_models = '.*': cannot read"):
        gm.lookup("V100")
    gm.use_site_models("relative.json", "$WATTBATCH_PHYSICS_SITE_GPU_MODELS")
    with pytest.raises(ConfigError, match="give an absolute path"):
        gm.names()


def test_the_document_is_written_whole_or_not_at_all(tmp_path):
    p = tmp_path / "site-gpus.json"
    doc = site_document(str(p), "test", gm.shipped())
    assert doc["models"] == {} and doc["calibrations"] == {}
    doc["models"][H100] = {"idle_power_w": _rec(75.0)}
    write_site_document(str(p), doc, gm.shipped())
    assert site_document(str(p), "test", gm.shipped())["models"] == {
        H100: {"idle_power_w": _rec(75.0)}}
    before = p.read_text()
    doc["models"][H100] = {"idle_power_w": _rec(-1.0)}
    with pytest.raises(ConfigError, match=r"models.H100-80GB-HBM3.idle_power_w.value = -1.0"):
        write_site_document(str(p), doc, gm.shipped())
    assert p.read_text() == before and [f.name for f in tmp_path.iterdir()] == [p.name]


def test_a_site_v100_calibration_wins_while_the_classes_keep_their_measured_board(tmp_path):
    from slurm_plugin.physics import idle_power_w, job_class
    from slurm_plugin.physics.constants import reference_constants
    ref_idle = reference_constants()["idle_power_w"]
    vgg = job_class("vgg16").power_at(1, "V100")
    gm.use_site_models(str(_site(tmp_path, {"V100": {"idle_power_w": _rec(50.0)}})))
    assert idle_power_w("V100") == idle_power_w("Tesla V100-SXM2-32GB") == 50.0
    assert reference_constants()["idle_power_w"] == ref_idle      # physics.json untouched
    # the class keeps its measured dynamic draw above the site's own idle
    assert job_class("vgg16").power_at(1, "V100") == pytest.approx(vgg - ref_idle + 50.0,
                                                                    rel=1e-9)
    gm.use_site_models("")
    assert idle_power_w("V100") == ref_idle


def test_calibrated_co_location_constants_are_what_the_physics_computes_with(tmp_path):
    from slurm_plugin.physics import colocated_slowdown
    table = {**gm.shipped()["models"][H100]["colocation_pairs"]["value"], "aps|aps": [0.8, 0.8]}
    gm.use_site_models(str(_site(tmp_path, {H100: {
        "interference_k": _rec(0.0), "interference_k_mps": _rec(1.2),
        "colocation_pairs": _rec(table)}})))
    m = gm.lookup("H100")
    assert (m.interference_k, m.interference_k_mps) == (0.0, 1.2)
    assert colocated_slowdown("aps", "aps", model="H100") == (1 / 0.8, 1 / 0.8)
    assert colocated_slowdown("aps", "nas", model="H100") == (1.0, 1.0)      # k 0
    assert colocated_slowdown("aps", "nas", model="H100", mode="mps")[0] > 1.5
    assert colocated_slowdown("aps", "nas", model="A100") == colocated_slowdown("aps", "nas")
