"""The policies' own site sections (elastic, ones, tiresias) read through one checker: bad
values and unknown keys name the section, the key and the value and say what to give."""

from __future__ import annotations

import math

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.policy.elastic.settings import ElasticSettings
from slurm_plugin.policy.elastic.settings import parse_settings as elastic
from slurm_plugin.policy.ones.settings import OnesSettings
from slurm_plugin.policy.ones.settings import parse_settings as ones
from slurm_plugin.policy.tiresias.settings import parse_settings as tiresias


@pytest.mark.parametrize("parse, key, value, fix", [
    (ones, "population", 1, "give a whole number >= 2 and <= 256"),
    (ones, "population", 8.5, "give a whole number >= 2 and <= 256"),
    (ones, "crossover_p", 1.5, "give a number >= 0 and <= 1"),
    (ones, "min_gain", math.nan, "give a number >= 0"),
    (ones, "seed", True, "give a whole number >= 0"),
    (elastic, "min_efficiency", "0.5", "give a number >= 0 and <= 1"),
    (elastic, "max_resizes_per_pass", 2.5, "give a whole number >= 0"),
    (elastic, "measure_restart_cost", 1, "give true or false"),
    (tiresias, "lookahead", 0, "give a whole number >= 1"),
    (tiresias, "thresholds_gpu_s", [36000, 3600], "give ascending positive GPU-seconds"),
])
def test_a_bad_value_names_section_key_and_value(parse, key, value, fix):
    with pytest.raises(ConfigError) as e:
        parse({key: value})
    text = str(e.value)
    assert key in text and repr(value) in text and fix in text


def test_unknown_keys_list_the_known_and_site_keys_pass():
    with pytest.raises(ConfigError, match=r"unknown key; known: crossover_p, generations"):
        ones({"populaton": 8})
    with pytest.raises(ConfigError, match=r"unknown key; known: .*measure_restart_cost"):
        elastic({"nope": 1})
    with pytest.raises(ConfigError, match=r"queued jobs are no longer held: no hold_s"):
        tiresias({"hold_s": 60})
    s = ones({"allow_share": True, "share_gres": "mps", "population": 4, "mutation_p": 0.25})
    assert s == OnesSettings(population=4, mutation_p=0.25)
    assert isinstance(s.population, int) and isinstance(s.mutation_p, float)


def test_the_same_mapping_is_read_once_and_another_anew():
    raw = {"min_interval_s": 30}
    first = elastic(raw)
    assert elastic(raw) is first and first == ElasticSettings(min_interval_s=30.0)
    assert elastic({"min_interval_s": 60}).min_interval_s == 60.0
    assert elastic(None) == ElasticSettings()
