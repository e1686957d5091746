"""`wattctl simulate --compare` table: columns never run together."""

from slurm_plugin.commands.simulate import table


def test_wide_cells_under_short_policy_names_keep_a_gap():
    out = table([{"policy": "eaco", "energy_kwh": 3848.0, "avg_jct_s": 2607134.0},
                 {"policy": "pal", "energy_kwh": 47413.0, "avg_jct_s": 2607074.0}])
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["energy_kwh"].split()[1:] == ["3,848", "47,413", "(12.32x)"]
    assert lines["avg_jct_s"].split()[1:] == ["2,607,134", "2,607,074", "(1.00x)"]
    header = out.splitlines()[0]
    # every column right-aligned under its header
    for line in out.splitlines()[1:]:
        assert len(line) == len(header)
