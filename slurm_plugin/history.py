"""The observed figures a policy learns from (``Context.history``): one JSON file in the
reconciler's state directory, written by ``wattctl reconcile``, read by it and by wattbatch.

Observed figures (``pair:...``, ``job:...``: a measured slowdown) hold a running mean of what
was observed and how many observations made it. Every other key is a policy's state (EaCO's
observation marks, GreenFlow's carbon spent, the elastic policy's runs and rates): the last value
written wins, as in the simulator, and the count says how often it was written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from types import MappingProxyType

from .errors import StateError

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from pathlib import Path

FILE_NAME = "history.json"
GROUP_PREFIXES = ("mark:", "seen:")
MEAN_PREFIXES = ("pair:", "job:")       # observed figures, averaged; all else: last value
JOB_PREFIXES = ("elastic:", "ones:", "tiresias:")     # per-job state, ``<prefix>...:<job id>``


class History:
    """Observed figures (e.g. a pair's measured slowdown), averaged, kept in a JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, dict[str, float]] = {}
        self.warning = ""
        if path.exists():
            try:
                data = json.loads(path.read_bytes().decode("utf-8"))
                _values(data)             # of the right shape: key -> {"value", "n"}
                self._data = data
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                self.warning = (f"history: {path} is not JSON ({exc}); starting afresh, the "
                                f"old file is kept as {path.name}.corrupt")

    def view(self) -> Mapping[str, float]:
        return _values(self._data)

    def add(self, key: str, value: float) -> None:
        old = self._data.get(key)
        if old is None:
            self._data[key] = {"value": value, "n": 1}
        elif not key.startswith(MEAN_PREFIXES):
            self._data[key] = {"value": value, "n": old["n"] + 1}
        else:
            n = old["n"] + 1
            self._data[key] = {"value": old["value"] + (value - old["value"]) / n, "n": n}

    def forget_groups(self, live_job_ids: Collection[str]) -> int:
        """Drop the per-group bookkeeping (``mark:<group>:...``, ``seen:<group>``; a group is
        its job ids joined by "+") of groups none of whose jobs is live, and the per-job state
        (``elastic:...:<job>``, ``ones:``, ``tiresias:``) of jobs that are not live. Returns how many keys went. Observed
        figures (``pair:...``, ``job:...``) are kept."""
        live = set(live_job_ids)
        gone = [k for k in self._data if (k.startswith(GROUP_PREFIXES)
                and not live.intersection(k.split(":")[1].split("+")))
                or (k.startswith(JOB_PREFIXES) and k.rsplit(":", 1)[1] not in live)]
        for k in gone:
            del self._data[k]
        return len(gone)

    def save(self) -> None:
        if self.warning and self.path.exists() and not self.path.with_name(
                self.path.name + ".corrupt").exists():
            self.path.replace(self.path.with_name(self.path.name + ".corrupt"))
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self._data, indent=1, sort_keys=True))
            tmp.replace(self.path)
        except OSError as exc:
            raise StateError(f"history: {self.path}: cannot write ({exc.strerror}); free space "
                             "in reconcile.state_dir") from None


def _values(data: Mapping[str, Mapping[str, float]]) -> Mapping[str, float]:
    return MappingProxyType({k: v["value"] for k, v in data.items()})


def read_view(state_dir: str | os.PathLike) -> Mapping[str, float]:
    """The history of ``state_dir`` as key -> value; empty when there is none yet (or it cannot
    be read: a submission must never fail for want of it). Plain file reading, no pathlib:
    wattbatch calls this on every submission."""
    try:
        with open(os.path.join(state_dir, FILE_NAME), encoding="utf-8") as fh:
            return _values(json.load(fh))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return MappingProxyType({})
