"""MIG profiles per GPU model, the rate rule, the power of a GPU in MIG mode and instance
layouts (``physics/mig.py``), with invariants over many groups of jobs and every MIG model."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from slurm_plugin.errors import ConfigError
from slurm_plugin.physics import class_names, job_class, shared_gpu_power_w
from slurm_plugin.physics.constants import catalogue_entry, gpu_constants
from slurm_plugin.physics.gpu_models import names
from slurm_plugin.physics.mig import (COMPUTE_SLICES, MEMORY_SLICES, _table, layout_valid,
                                      mig_gpu_power_w, mig_layout, mig_models, mig_profile,
                                      mig_profiles, mig_rate, smallest_profile, supports_mig)

# NVIDIA's MIG user guide, as the task lists them (the +me variants left out)
GUIDE = {
    "A100-SXM4-40GB": {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
    "A100": {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
    "H100": {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
    "H100-NVL": {"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"},
    "H200": {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
}
NO_MIG = ("V100", "V100-PCIE-16GB", "A40", "L40S")


def test_every_family_names_catalogued_entries_once():
    listed = mig_models()
    assert len(listed) == len(set(listed))
    assert set(listed) <= set(names())
    assert {catalogue_entry(m) for m in GUIDE} <= set(listed)
    assert not set(listed) & {catalogue_entry(m) for m in NO_MIG}


@pytest.mark.parametrize("model", sorted(GUIDE))
def test_the_guides_profiles_are_there(model):
    assert GUIDE[model] <= {p.name for p in mig_profiles(model)}


@pytest.mark.parametrize("family", sorted(_table()["families"]))
def test_profile_names_say_their_slices_and_memory(family):
    body = _table()["families"][family]
    board_gb = int(re.search(r"(\d+)GB", family).group(1))
    for model in body["models"]:
        profiles = mig_profiles(model)
        assert [(p.compute_slices, p.memory_slices) for p in profiles] == \
            sorted((p.compute_slices, p.memory_slices) for p in profiles)
        memory = gpu_constants(model)["memory_mib"]
        for p in profiles:
            g, gb = re.fullmatch(r"(\d)g\.(\d+)gb", p.name).groups()
            assert int(g) == p.compute_slices
            assert abs(board_gb * p.memory_slices / MEMORY_SLICES - int(gb)) <= 1, p.name
            assert p.memory_mib == memory * p.memory_slices // MEMORY_SLICES
            assert 1 <= p.max_instances <= COMPUTE_SLICES // p.compute_slices
        whole = profiles[-1]
        assert (whole.compute_slices, whole.memory_slices) == (COMPUTE_SLICES, MEMORY_SLICES)


@pytest.mark.parametrize("model", NO_MIG)
def test_a_model_without_mig_is_an_error_naming_it(model):
    assert not supports_mig(model)
    with pytest.raises(ConfigError) as err:
        mig_profiles(model)
    assert err.value.value == model and "has no MIG" in err.value.fix
    assert catalogue_entry(model) in str(err.value)


def test_names_as_the_catalogue_reads_them():
    assert mig_profiles("NVIDIA A100-SXM4-80GB") == mig_profiles("a100")
    assert mig_profiles("nvidia h100 80gb hbm3") == mig_profiles("H100")
    assert mig_profile("H200", "MIG 3G.71GB").name == "3g.71gb"
    assert not supports_mig("H300")
    with pytest.raises(ConfigError) as err:
        mig_profile("A100", "5g.50gb")
    assert err.value.key == "mig_profile" and err.value.value == "5g.50gb"
    assert "3g.40gb" in err.value.fix and "A100-SXM4-80GB" in err.value.fix


def test_rate_is_the_instances_share_over_the_jobs_utilisation():
    p3 = mig_profile("A100", "3g.40gb")           # 3/7 compute, 4/8 memory
    assert p3.share == pytest.approx(3 / 7)
    assert mig_rate(p3, 0.0) == 1.0
    assert mig_rate(p3, 30.0) == 1.0
    assert mig_rate(p3, 60.0) == pytest.approx((3 / 7) / 0.6)
    p4 = mig_profile("A100", "4g.40gb")           # 4/7 compute, 4/8 memory: the memory binds
    assert p4.share == pytest.approx(0.5)
    assert mig_rate(p4, 80.0) == pytest.approx(0.5 / 0.8)
    assert mig_rate(mig_profile("A100", "7g.80gb"), 100.0) == 1.0


@pytest.mark.parametrize("model", sorted(GUIDE))
def test_rate_grows_with_the_instance_and_falls_with_utilisation(model):
    profiles = mig_profiles(model)
    for u in (1.0, 10.0, 33.0, 50.0, 75.0, 100.0):
        for a, b in itertools.combinations(profiles, 2):
            if a.compute_slices <= b.compute_slices and a.memory_slices <= b.memory_slices:
                assert mig_rate(a, u) <= mig_rate(b, u)
        for p in profiles:
            assert 0.0 < mig_rate(p, u) <= 1.0
            assert mig_rate(p, u) >= mig_rate(p, min(100.0, u + 10))


@pytest.mark.parametrize("model", ["A100", "H100", "H200"])
def test_power_is_the_shared_gpu_form_capped(model):
    dyn, rates = [120.0, 80.0], [1.0, 0.8]
    assert mig_gpu_power_w(dyn, rates, model) == shared_gpu_power_w(dyn, rates, model=model)
    c = gpu_constants(model)
    assert mig_gpu_power_w(dyn, rates, model) == pytest.approx(c["idle_power_w"] + 120 + 64)
    assert mig_gpu_power_w([5000.0], [1.0], model) == c["max_power_w"]
    assert mig_gpu_power_w(dyn, rates, model, power_cap_w=150.0) == 150.0


def _job(rng: random.Random) -> tuple[float, float]:
    if rng.random() < 0.5:
        c = job_class(rng.choice(class_names()))
        return c.util_at(1), float(c.memory_mib)
    return rng.uniform(0.0, 100.0), rng.uniform(100.0, 90_000.0)


@pytest.mark.parametrize("model", sorted(GUIDE))
def test_smallest_profile_is_the_first_that_holds_the_job(model):
    rng = random.Random(model)
    for _ in range(300):
        util, need = _job(rng)
        limit = rng.choice([1.0, 1.05, 1.1, 1.3, 2.0])
        fill = rng.choice([100.0, 90.0])
        p = smallest_profile(model, util, need, limit, fill)
        ok = [q for q in mig_profiles(model)
              if 1 / mig_rate(q, util) <= limit + 1e-9 and need <= q.memory_mib * fill / 100]
        assert p == (ok[0] if ok else None)


@pytest.mark.parametrize("model", sorted(GUIDE))
def test_layouts_over_random_groups(model):
    """A layout: each job its smallest profile, the slices and instances within the GPU's, or
    None; the same for any order of the jobs; a job more never turns None into a layout; the
    instances taken count as the new ones do."""
    rng = random.Random(f"layout:{model}")
    profiles = mig_profiles(model)
    for _ in range(400):
        jobs = [_job(rng) for _ in range(rng.randint(1, 8))]
        limit = rng.choice([1.05, 1.1, 1.5])
        got = mig_layout(model, jobs, limit, mem_fill_pct=90.0)
        each = [smallest_profile(model, u, m, limit, 90.0) for u, m in jobs]
        if got is not None:
            assert list(got) == each and layout_valid(got)
            assert sum(p.compute_slices for p in got) <= COMPUTE_SLICES
            assert sum(p.memory_slices for p in got) <= MEMORY_SLICES
            assert len(got) <= 7
            for p in set(got):
                assert got.count(p) <= p.max_instances
        else:
            assert None in each or not layout_valid(each)
        shuffled = jobs[:]
        rng.shuffle(shuffled)
        again = mig_layout(model, shuffled, limit, mem_fill_pct=90.0)
        assert (again is None) == (got is None)
        if got is not None:
            assert sorted(p.name for p in again) == sorted(p.name for p in got)
        if got is None:
            assert mig_layout(model, jobs + [_job(rng)], limit, mem_fill_pct=90.0) is None
        taken = tuple(rng.choice(profiles) for _ in range(rng.randint(0, 3)))
        beside = mig_layout(model, jobs, limit, taken, 90.0)
        assert (beside is not None) == (None not in each and layout_valid(list(taken) + each))


def test_layout_rules():
    p = {q.name: q for q in mig_profiles("A100")}
    assert layout_valid([p["3g.40gb"], p["4g.40gb"]])
    assert layout_valid([p["3g.40gb"], p["3g.40gb"]])
    assert layout_valid([p["1g.10gb"]] * 7)
    assert not layout_valid([p["1g.10gb"]] * 8)
    assert not layout_valid([p["4g.40gb"], p["4g.40gb"]])      # 8 compute slices
    assert not layout_valid([p["3g.40gb"], p["3g.40gb"], p["1g.10gb"]])   # 9 memory slices
    assert not layout_valid([p["1g.20gb"]] * 5)                # 4 instances at most
    assert layout_valid([])
