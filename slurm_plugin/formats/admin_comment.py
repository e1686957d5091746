"""wattbatch's record in a job's comments, as job_submit.lua and reconcile write it and as the
live path and the simulator (a site's accounting) both read it: the class a job declares
(``app=NAME`` in its comment) and the ``wb:key=value;..`` word of its AdminComment (declared
class, power cap, slack, nice, elastic range, batch range and learning-rate rule)."""

from __future__ import annotations

import re

_APP = re.compile(r"(?:^|[\s,;])app=([^\s,;]+)")


def app_from_comment(comment: str) -> str:
    """The workload class a job declares in its comment as ``app=NAME`` ("" if none)."""
    m = _APP.search(comment or "")
    return m.group(1) if m else ""


_DECLARED = re.compile(r"^wb:(?:.*;)?declared_app=([^;\s]*)")


def recorded_app(admin_comment: str) -> str | None:
    """The class job_submit.lua recorded in AdminComment at submission (``wb:uid=..;
    declared_app=NAME;..``, "" when the job declared none); None without that record."""
    m = _DECLARED.match(admin_comment or "")
    return m.group(1) if m else None


def _recorded_number(admin_comment: str, key: str) -> float | None:
    m = re.search(r"(?:^|\s)wb:(?:[^\s]*;)?" + key + r"=([^;\s]*)", admin_comment or "")
    try:
        value = float(m.group(1)) if m else 0.0
    except ValueError:
        return None
    return value if 0.0 < value < 1e9 else None


def recorded_cap(admin_comment: str) -> float | None:
    """The GPU power cap (W) recorded for a job in AdminComment (``wb:..;cap=W``: by
    job_submit.lua from wattbatch's tag, or by reconcile's ``power_cap`` action); None: none,
    or a value that is not a positive number of watts."""
    cap_w = _recorded_number(admin_comment, "cap")
    return cap_w if cap_w is not None and cap_w < 1e5 else None


def recorded_slack(admin_comment: str) -> float | None:
    """How long (s) the job's start may be shifted (``--wb-slack``), as job_submit.lua
    recorded it from wattbatch's tag (``wb:..;slack=S``); None: not deferrable."""
    return _recorded_number(admin_comment, "slack")


def recorded_nice(admin_comment: str, comment: str = "") -> int:
    """The job's own ``--nice`` that wattbatch added its queue tier to (``wb:..;nice=N``, in
    AdminComment as job_submit.lua recorded it, else in the comment's own tag); 0 without."""
    for text in (admin_comment, comment):
        m = re.search(r"(?:^|\s)wb:(?:[^\s]*;)?nice=(-?\d{1,9})(?:[;\s]|$)", text or "")
        if m:
            return int(m.group(1))
    return 0


def _recorded_range(admin_comment: str, key: str) -> tuple[int, int] | None:
    m = re.search(r"(?:^|\s)wb:(?:[^\s]*;)?" + key + r"=(\d{1,9})-(\d{1,9})(?:[;\s]|$)",
                  admin_comment or "")
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    return (lo, hi) if 1 <= lo <= hi else None


def recorded_elastic(admin_comment: str) -> tuple[int, int] | None:
    """The GPU range (MIN, MAX) job_submit.lua recorded for an elastic job from wattbatch's tag
    (``wb:..;elastic=1-4``, ``--wb-elastic``); None: not elastic, or a range that is not
    1 <= MIN <= MAX."""
    return _recorded_range(admin_comment, "elastic")


def recorded_batch(admin_comment: str) -> tuple[tuple[int, int] | None, str]:
    """The global batch-size range the scheduler may choose from (``wb:..;batch=64-1024``,
    ``--wb-batch-size``; None: the job's own) and its learning-rate rule (``lr=sqrt``;
    "" for linear), as job_submit.lua recorded them."""
    m = re.search(r"(?:^|\s)wb:(?:[^\s]*;)?lr=(linear|sqrt)(?:[;\s]|$)", admin_comment or "")
    return _recorded_range(admin_comment, "batch"), m.group(1) if m else ""


def with_cap(admin_comment: str, cap_w: float | None) -> str:
    """``admin_comment`` with its ``wb:`` word's ``cap=`` set to ``cap_w`` (None: removed);
    every other word and key kept as it was."""
    words = (admin_comment or "").split()
    at = next((k for k, w in enumerate(words) if w.startswith("wb:")), None)
    if at is None:
        words.append("wb:")
        at = len(words) - 1
    head, *keys = words[at][3:].split(";") if words[at][3:] else [""]
    items = [k for k in [head, *keys] if k and not k.startswith("cap=")]
    if cap_w is not None:
        items.append(f"cap={cap_w:.0f}")
    words[at] = "wb:" + ";".join(items)
    return " ".join(w for w in words if w != "wb:")
