"""A site's own GPU model entries: the file named by the site key ``physics.site_gpu_models``.

``wattctl calibrate-gpus`` writes it; ``gpu_models.catalogue()`` lays its entries over the
shipped catalogue (the site's constants win, the shipped file is never changed). The file is
JSON:

    {"about": "...",
     "models": {"H100-80GB-HBM3": {"idle_power_w": {"value": 70.2, "source": "measured",
                                                    "how": "...", "rows": 4}, ...}},
     "calibrations": {"H100-80GB-HBM3": {"at": "...", "node": "...", "samples": {...}}}}

An entry of ``models`` is named as the catalogue names it (an entry name, an NVML name or an
alias, any case) and holds constants only, each a record in the catalogue's own format
(``value``, ``source``, ``how``, ...); a constant it does not hold keeps the shipped value.
Anything that does not parse is a ``ConfigError`` naming the file, the key and the value.
"""

from __future__ import annotations

import json
import math
import os

from ..errors import ConfigError
from .gpu_models import CONSTANTS, SOURCES, normalise

SITE_KEY = "physics.site_gpu_models"
ABOUT = ("GPU model constants calibrated on this site by `wattctl calibrate-gpus`; each "
         "replaces the shipped catalogue's constant of the same model (docs/gpu-models.md).")
# constants that may be 0 (the interference model's); every other numeric one is above 0
NON_NEGATIVE = ("interference_k", "interference_util_threshold", "interference_k_mps")
# a measured pair's normalised speed: above 0, and at most this (a pair much faster than alone
# is not a measurement)
MAX_PAIR_SPEED = 1.5


def read_site_models(path: str, origin: str, shipped: dict) -> dict[str, dict]:
    """Entry name -> {constant: record} of the site file ``path`` (named by ``origin``: where
    ``physics.site_gpu_models`` was set), checked against the ``shipped`` catalogue; {} while
    the file does not exist (the key set before the first calibration wrote it)."""
    text = _read(path, origin)
    return {} if text is None else parse_site_models(text, path, shipped)


def _read(path: str, origin: str) -> str | None:
    """The file's text; None when it does not exist."""
    if not os.path.isabs(path):
        raise ConfigError(origin, SITE_KEY, path, "give an absolute path: the collector, the "
                          "jobs and wattctl read it from their own working directories")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConfigError(origin, SITE_KEY, path, "not UTF-8 text: not a GPU model file "
                          "(wattctl calibrate-gpus writes one)") from None
    except OSError as exc:
        raise ConfigError(origin, SITE_KEY, path, f"cannot read the site's GPU model file "
                          f"({exc.strerror}); fix the path, or set it to \"\" to compute "
                          "with the shipped catalogue") from None


def parse_site_models(text: str, path: str, shipped: dict) -> dict[str, dict]:
    """The checked ``models`` of a site file's ``text`` (``path`` names it in errors)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.splitlines()
        shown = (lines[exc.lineno - 1].strip()[:80] if exc.lineno <= len(lines)
                 else "(end of file)")
        raise ConfigError(path, f"line {exc.lineno} column {exc.colno}", shown,
                          f"not JSON ({exc.msg}); fix the file named by {SITE_KEY}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        got = doc.get("models") if isinstance(doc, dict) else doc
        raise ConfigError(path, "models", got, "expected an object of GPU model entries "
                          "({\"models\": {NAME: {constant: {\"value\": ..., \"source\": "
                          "...}}}})")
    names = _names(shipped)
    out: dict[str, dict] = {}
    for raw_name, body in doc["models"].items():
        name = names.get(normalise(raw_name))
        if name is None:
            raise ConfigError(path, f"models.{raw_name}", raw_name,
                              "not a catalogued GPU model (wattctl gpu-models lists them); a "
                              "site entry adjusts a catalogued model's constants")
        if name in out:
            raise ConfigError(path, f"models.{raw_name}", raw_name,
                              f"names {name} again: give each model once")
        out[name] = _entry(path, raw_name, body, shipped["models"][name])
    return out


def catalogue_name(name: str, shipped: dict) -> str | None:
    """The ``shipped`` catalogue's entry a name means (entry, NVML name or alias, any case),
    without a site's file; None when it has none."""
    return _names(shipped).get(normalise(name))


def _names(shipped: dict) -> dict[str, str]:
    out = {}
    for key, m in shipped["models"].items():
        for n in (key, *m["nvml_names"], *m["aliases"]):
            out[normalise(n)] = key
    return out


def _entry(path: str, name: str, body: object, shipped_entry: dict) -> dict:
    if not isinstance(body, dict):
        raise ConfigError(path, f"models.{name}", body, "expected an object of constants")
    for const, rec in body.items():
        key = f"models.{name}.{const}"
        if const not in CONSTANTS:
            raise ConfigError(path, key, rec, f"not a constant of the catalogue; a site entry "
                              f"holds constants only: {', '.join(CONSTANTS)}")
        if not isinstance(rec, dict) or "value" not in rec:
            raise ConfigError(path, key, rec, "expected a record {\"value\": ..., "
                              "\"source\": ..., \"how\": ...}")
        if rec.get("source") not in SOURCES:
            raise ConfigError(path, f"{key}.source", rec.get("source"),
                              f"choose one of: {', '.join(SOURCES)}")
        _check_value(path, f"{key}.value", const, rec["value"])
    merged = {c: (body.get(c) or shipped_entry[c])["value"] for c in CONSTANTS}
    for low, high in (("idle_power_w", "max_power_w"), ("min_power_cap_w", "max_power_w")):
        if merged[low] > merged[high]:
            at = low if low in body else high
            raise ConfigError(path, f"models.{name}.{at}.value", merged[at],
                              f"{low} {merged[low]:g} is above {high} {merged[high]:g} "
                              "(with the shipped value of the constant the entry lacks)")
    return dict(body)


def _check_value(path: str, key: str, const: str, value: object) -> None:
    if const == "colocation_pairs":
        if not isinstance(value, dict):
            raise ConfigError(path, key, value, "expected {\"a|b\": [speed_a, speed_b]}")
        for pair, v in value.items():
            ok = "|" in pair and isinstance(v, list) and len(v) == 2 and all(
                _number(x) and 0 < x <= MAX_PAIR_SPEED for x in v)
            if not ok:
                raise ConfigError(path, f"{key}.{pair}", v, "expected a pair \"a|b\" of two "
                                  f"normalised speeds [speed_a, speed_b], each above 0 and at "
                                  f"most {MAX_PAIR_SPEED:g}")
        return
    floor_ok = (lambda v: v >= 0) if const in NON_NEGATIVE else (lambda v: v > 0)
    if not _number(value) or not floor_ok(value):
        raise ConfigError(path, key, value, "expected a finite number "
                          + ("of at least 0" if const in NON_NEGATIVE else "above 0"))


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def overlay(shipped: dict, site: dict[str, dict]) -> dict:
    """The catalogue ``shipped`` with each site entry's constants in place of its own."""
    models = dict(shipped["models"])
    for name, body in site.items():
        models[name] = {**models[name], **body}
    return {**shipped, "models": models}


def site_document(path: str, origin: str, shipped: dict) -> dict:
    """The whole site file at ``path``, checked (no models when it does not exist yet)."""
    text = _read(path, origin)
    if text is None:
        return {"about": ABOUT, "models": {}, "calibrations": {}}
    models = parse_site_models(text, path, shipped)
    doc = json.loads(text)
    calibrations = doc.get("calibrations")
    if calibrations is not None and not isinstance(calibrations, dict):
        raise ConfigError(path, "calibrations", calibrations, "expected an object")
    return {"about": doc.get("about", ABOUT), "models": models,
            "calibrations": dict(calibrations or {})}


def write_site_document(path: str, doc: dict, shipped: dict) -> None:
    """Write ``doc`` to ``path`` atomically (aside, checked by reading it back, renamed): a
    reader sees the old file or the new one, never a part."""
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    parse_site_models(text, path, shipped)
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ConfigError(path, SITE_KEY, path, f"cannot write ({exc.strerror}); the file "
                          "is left as it was") from None
