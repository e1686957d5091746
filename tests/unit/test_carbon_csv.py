"""Carbon-intensity CSV parsing (both formats) and the in-memory carbon provider."""

from __future__ import annotations

import pytest

from slurm_plugin.errors import InputError
from slurm_plugin.formats.carbon_series import SeriesCarbon
from slurm_plugin.formats.carbon_csv import load

EM_HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
             "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
             "Data Source,Data Estimated,Data Estimation Method\n")
EM_ROWS = ("2023-01-01 00:00:00,Great Britain,Great Britain,GB,62.55,91.44,86.0,60.17,"
           "elexon.co.uk;  nationalgrideso.com,false,\n"
           "2023-01-01 01:00:00,Great Britain,Great Britain,GB,65.09,94.66,85.67,60.35,"
           "elexon.co.uk,false,\n")
T0 = 1672531200.0   # 2023-01-01 00:00:00 UTC


def _file(tmp_path, text, name="c.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_electricity_maps_lca_by_default(tmp_path):
    s = load(_file(tmp_path, EM_HEADER + EM_ROWS))
    assert (s.format, s.zone) == ("electricitymaps", "GB")
    assert [(p.time_s, p.gco2_per_kwh, p.gco2_per_kwh_direct) for p in s.points] == [
        (T0, 91.44, 62.55), (T0 + 3600, 94.66, 65.09)]


def test_electricity_maps_direct_basis(tmp_path):
    s = load(_file(tmp_path, EM_HEADER + EM_ROWS), basis="direct")
    assert [p.gco2_per_kwh for p in s.points] == [62.55, 65.09]


# the header of Electricity Maps' current exports (2024 on): other case, "Life cycle" for LCA
EM_HEADER_NOW = ("Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
                 "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),"
                 "Renewable energy percentage (RE%),Data source,Data estimated,"
                 "Data estimation method\n")


@pytest.mark.parametrize("basis, want", [("lca", [91.44, 94.66]), ("direct", [62.55, 65.09])])
def test_electricity_maps_current_header(tmp_path, basis, want):
    s = load(_file(tmp_path, EM_HEADER_NOW + EM_ROWS), basis=basis)
    assert (s.format, s.zone, s.skipped) == ("electricitymaps", "GB", ())
    assert [p.gco2_per_kwh for p in s.points] == want


def test_header_names_match_without_case_spacing_or_subscript(tmp_path):
    header = ("datetime (UTC),zone ID,carbon  intensity gCO2eq/kWh (life cycle)\n")
    s = load(_file(tmp_path, header + "2023-01-01 00:00:00,GB,91.44\n"))
    assert (s.zone, [p.gco2_per_kwh for p in s.points], s.points[0].gco2_per_kwh_direct) == \
        ("GB", [91.44], None)


def test_hours_without_a_value_are_skipped_and_reported(tmp_path):
    rows = ("2023-01-01 00:00:00,GB,GB,GB,62.55,91.44,1,1,x,false,\n"
            "2023-01-01 01:00:00,GB,GB,GB,,,1,1,x,true,\n"
            "2023-01-01 02:00:00,GB,GB,GB,60.0,NaN,1,1,x,true,\n"
            "2023-01-01 03:00:00,GB,GB,GB,,90.0,1,1,x,true,\n")
    path = _file(tmp_path, EM_HEADER_NOW + rows)
    s = load(path)
    assert s.skipped == (3, 4)
    assert [(p.time_s, p.gco2_per_kwh, p.gco2_per_kwh_direct) for p in s.points] == [
        (T0, 91.44, 62.55), (T0 + 3 * 3600, 90.0, None)]
    assert s.skipped_note() == (f"carbon csv: {path}: 2 row(s) without a value skipped "
                                "(line 3, 4); the hours around them stand in for them")
    assert load(path, basis="direct").skipped == (3, 5)
    assert load(_file(tmp_path, EM_HEADER + EM_ROWS, "d.csv")).skipped_note() == ""


def test_lets_wait_awhile_format_sorted_and_deduplicated(tmp_path):
    text = ("Time,Carbon Intensity\n2019-12-20 00:30:00,42.1\n2019-12-20 00:00:00,42.3\n"
            "2019-12-20 00:30:00,43.0\n\n")
    s = load(_file(tmp_path, text))
    assert (s.format, s.zone) == ("lets-wait-awhile", "")
    assert [(p.time_s, p.gco2_per_kwh) for p in s.points] == [(1576800000.0, 42.3),
                                                               (1576801800.0, 43.0)]


@pytest.mark.parametrize("rows, line, field", [
    ("2023-01-01 00:00:00,GB,GB,GB,62.55,91.44,1,1,x,false,\n"
     "2023-13-01 01:00:00,GB,GB,GB,62.55,91.44,1,1,x,false,\n", 3, "Datetime (UTC)"),
    ("2023-01-01 00:00:00,GB,GB,GB,62.55,abc,1,1,x,false,\n", 2,
     "Carbon Intensity gCO₂eq/kWh (LCA)"),
    ("2023-01-01 00:00:00,GB,GB,GB,-1,91.44,1,1,x,false,\n", 2,
     "Carbon Intensity gCO₂eq/kWh (direct)"),
    ("2023-01-01 00:00:00,GB,GB,GB\n", 2, "Carbon Intensity gCO₂eq/kWh (direct)"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, rows, line, field):
    path = _file(tmp_path, EM_HEADER + rows)
    with pytest.raises(InputError) as info:
        load(path)
    assert f"{path}:{line}: field {field!r}" in str(info.value)


def test_bad_lets_wait_awhile_value(tmp_path):
    path = _file(tmp_path, "Time,Carbon Intensity\n2020-01-01 00:00:00,abc\n")
    with pytest.raises(InputError, match=r"c\.csv:2: field 'Carbon Intensity' = 'abc'"):
        load(path)


@pytest.mark.parametrize("text, needle", [
    ("", ":1: empty file"),
    ("a,b\n1,2\n", ":1: header"),
    ("Datetime (UTC),Zone Id\n", "column 'Carbon Intensity gCO₂eq/kWh (LCA)' missing"),
    ("Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct)\n",
     "the file has the other basis only"),
    (EM_HEADER + "2023-01-01 00:00:00,GB,GB,GB,62.55,,1,1,x,false,\n",
     "no data rows after the header with a value (1 without one)"),
    ("Time,Carbon Intensity\n", "no data rows"),
])
def test_bad_files(tmp_path, text, needle):
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load(_file(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load(tmp_path / "nope.csv")


def test_series_provider_lookup_and_forecast(tmp_path):
    provider = SeriesCarbon.from_series(load(_file(tmp_path, EM_HEADER + EM_ROWS)))
    assert provider.zone == "GB"
    assert provider.intensity_at(T0 - 1) is None
    assert provider.intensity_at(T0) == 91.44
    assert provider.intensity_at(T0 + 3599) == 91.44
    assert provider.intensity_at(T0 + 7200) == 94.66
    assert provider.forecast(T0, T0 + 3600) == ((T0 + 3600, 94.66),)
    assert provider.forecast(T0 - 1, T0 + 10) == ((T0, 91.44),)


@pytest.mark.parametrize("file_zone, zone, ok", [
    ("GB", "GB", True), ("GB", "gb", True), ("DE", "DE-LU", True), ("", "FR", True),
    ("US-TEX-ERCO", "US", False), ("US-TEX-ERCO", "GB", False), ("DE-LU", "DE", False),
    ("DE", "DEU", False)])
def test_zone_matches(file_zone, zone, ok):
    from slurm_plugin.formats.carbon_csv import zone_matches
    assert zone_matches(file_zone, zone) is ok


def test_repeated_times_are_noted_and_the_last_row_kept(tmp_path):
    rows = EM_ROWS + EM_ROWS.splitlines(keepends=True)[1].replace("65.09,94.66", "1,2")
    s = load(_file(tmp_path, EM_HEADER + rows))
    assert [p.gco2_per_kwh for p in s.points] == [91.44, 2.0] and s.repeated == (4,)
    assert s.notes() == (f"carbon csv: {tmp_path / 'c.csv'}: 1 row(s) repeat an earlier row's "
                         f"time (line 4); the last row of each time is kept",)


@pytest.mark.parametrize("header", ["time,carbon intensity", ",Time,Carbon Intensity",
                                    "TIME, Carbon  Intensity"])
def test_lets_wait_awhile_header_as_pandas_and_other_spellings_write_it(tmp_path, header):
    index = header.startswith(",")
    body = "".join(f"{str(i) + ',' if index else ''}2019-12-20 0{i}:00:00,{40 + i}\n"
                   for i in range(3))
    s = load(_file(tmp_path, header + "\n" + body))
    assert s.format == "lets-wait-awhile" and [p.gco2_per_kwh for p in s.points] == [40, 41, 42]


def test_a_site_carbon_file_of_another_zone_is_a_config_error(tmp_path):
    from slurm_plugin.errors import ConfigError
    from slurm_plugin.telemetry.carbon import provider_from_config
    path = _file(tmp_path, EM_HEADER + EM_ROWS)
    cfg = {"carbon.file": str(path), "carbon.zone": "DE-LU"}
    with pytest.raises(ConfigError) as info:
        provider_from_config(cfg, None)
    assert "carbon.file" in str(info.value) and "carbon.zone = 'GB'" in str(info.value)
    assert provider_from_config({**cfg, "carbon.zone": "gb"}, None) is not None
