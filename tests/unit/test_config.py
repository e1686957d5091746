"""Site configuration: layers, errors that name file, key and value, and the parse cache."""

from __future__ import annotations

import os

import pytest

from slurm_plugin import config
from slurm_plugin.errors import ConfigError


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def site(tmp_path, text: str):
    p = tmp_path / "site.toml"
    p.write_text(text)
    return p


def test_layers_defaults_then_file_then_environment(tmp_path):
    p = site(tmp_path, '[policy]\nname = "eaco"\n[eaco]\nmax_slowdown = 1.2\n')
    cfg = config.load(p, environ={"WATTBATCH_EACO_ALPHA": "0.25"})
    assert cfg["policy.name"] == "eaco" and cfg.source("policy.name") == str(p)
    assert cfg["eaco.max_slowdown"] == 1.2 and cfg["eaco.alpha"] == 0.25
    assert cfg.source("eaco.alpha") == "$WATTBATCH_EACO_ALPHA"
    assert cfg.source("slurm.share_gres") == config.PACKAGED


def test_errors_name_the_file_the_key_and_the_value(tmp_path):
    with pytest.raises(ConfigError) as err:
        config.load(site(tmp_path, "[eaco]\nmax_slowdown = \"fast\"\n"), environ={})
    assert "site.toml" in str(err.value) and "eaco.max_slowdown" in str(err.value) \
        and "fast" in str(err.value)
    with pytest.raises(ConfigError, match="unknown key"):
        config.load(site(tmp_path, "[eaco]\nspeed = 1\n"), environ={})
    with pytest.raises(ConfigError, match="cannot read site config"):
        config.load(tmp_path / "missing.toml", environ={})


def test_a_parsed_file_is_reused_until_it_changes(tmp_path, monkeypatch, cache_dir):
    p = site(tmp_path, '[policy]\nname = "eaco"\n')
    assert config.load(p, environ={})["policy.name"] == "eaco"
    assert len(os.listdir(cache_dir)) == 2                    # packaged defaults + site file

    def no_parse(source, text):
        raise AssertionError(f"parsed {source} again")
    monkeypatch.setattr(config, "_parse_toml", no_parse)
    assert config.load(p, environ={})["policy.name"] == "eaco"   # both from the cache
    monkeypatch.undo()
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(cache_dir))
    p.write_text('[policy]\nname = "slurm-powersave"\n')         # another size: parsed again
    assert config.load(p, environ={})["policy.name"] == "slurm-powersave"


def test_a_bad_file_is_never_cached_and_an_unwritable_cache_is_no_error(tmp_path, monkeypatch):
    p = site(tmp_path, "[eaco]\nmax_slowdown = 0.5\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="at least"):
            config.load(p, environ={})
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("WATTBATCH_CACHE_DIR", str(blocker / "sub"))   # cannot be created
    p.write_text('[policy]\nname = "eaco"\n')
    assert config.load(p, environ={})["policy.name"] == "eaco"


def test_entries_of_deleted_files_are_dropped(tmp_path, cache_dir):
    gone = site(tmp_path, '[policy]\nname = "eaco"\n')
    config.load(gone, environ={})
    gone.unlink()
    other = tmp_path / "other.toml"
    other.write_text('[policy]\nname = "slurm-powersave"\n')
    config.load(other, environ={})
    names = os.listdir(cache_dir)
    assert any("other.toml" in n for n in names) and not any("site.toml" in n for n in names)


@pytest.mark.parametrize("line, key", [("[eaco]\nalpha = nan", "eaco.alpha"),
                                       ("[influx]\ntimeout_s = nan", "influx.timeout_s"),
                                       ("[greenflow]\nbudget_kg_per_day = -nan",
                                        "greenflow.budget_kg_per_day"),
                                       ("[eaco]\nmax_slowdown = inf", "eaco.max_slowdown")])
def test_nan_and_inf_are_no_number_in_range(tmp_path, line, key):
    # every comparison with NaN is false: a range check alone let nan through
    with pytest.raises(ConfigError, match="must be a finite number") as err:
        config.load(site(tmp_path, line + "\n"), environ={})
    msg = str(err.value)
    assert "site.toml" in msg and f"{key} = " in msg and ("nan" in msg or "inf" in msg)
    name = config.env_name(key)
    for text in ("nan", "NaN", "inf", "-inf"):
        with pytest.raises(ConfigError, match=rf"\${name}: {key} = '{text}': must be a finite"):
            config.load(os.devnull, environ={name: text})


def test_errors_with_fields_survive_a_process_boundary():
    """Raised in a worker process (a sweep's or a benchmark's pool), they come back whole."""
    import pickle

    from slurm_plugin.errors import CommandError
    err = pickle.loads(pickle.dumps(ConfigError("site.toml", "pal.profile", "/x", "fix it")))
    assert (err.source, err.key, err.value, err.fix) == ("site.toml", "pal.profile", "/x",
                                                         "fix it")
    assert str(err) == "config: site.toml: pal.profile = '/x': fix it"
    cmd = pickle.loads(pickle.dumps(CommandError(["sbatch", "x"], 1, "no")))
    assert (cmd.argv, cmd.returncode, str(cmd)) == (["sbatch", "x"], 1,
                                                    "command failed (exit 1): sbatch x\nno")
