"""Which Slurm wrote a JSON document, and how that Slurm spells what the parsers read.

Every ``--json`` document carries its writer in ``meta``: Slurm 22.05 as
``meta.plugin.type = "openapi/v0.0.38"`` and ``meta.Slurm.release``, Slurm 23.02 and later as
``meta.plugin.data_parser = "data_parser/v0.0.4x"`` and ``meta.slurm.release``. The parsers
read the version there, once per document, and hand each record to the ``Dialect`` of that
version: nothing deeper guesses from shapes. A version this module does not know, or a field
whose shape is not the one its version documents, is a ``FormatError`` naming the command, the
release and the field.

What differs (data_parser v0.0.38 of 22.05 -> v0.0.42 of 24.11 ... v0.0.45 of 26.05):
- states: a string (``"RUNNING"``; node ``"mixed"`` + ``state_flags``) -> a list of names
  (``["RUNNING"]``, ``["MIXED", "PLANNED"]``);
- counts and times: plain integers, 0 = unset -> ``{set, infinite, number}`` objects;
- ``exit_code``: a raw wait status -> ``{status: [...], return_code: {...}, signal: {...}}``;
- allocated nodes: ``job_resources.allocated_nodes[].nodename`` ->
  ``job_resources.nodes.allocation[].name``;
- the per-node listing: ``sinfo --json`` ``nodes`` -> ``scontrol --json show nodes`` ``nodes``
  (``sinfo --json`` now merges nodes of one state into one row);
- shard ``gres_detail``: ``shard:g1:2(IDX:1)`` -> ``shard:g1:2(0/4,2/4)`` (shares held per GPU
  of the node, over the GPU's total), see ``parse.parse_gres``;
- ``squeue --json`` lists only pending and running jobs unless ``-t all`` (22.05: every job).
"""

from __future__ import annotations

from ..errors import InputError
from ..record import record
from .document import SlurmJson

LEGACY = "v0.0.38"
# data_parser versions read with the newer dialect; the last is asked for by name when a
# newer Slurm writes one this module does not know (a release serves the last few).
CURRENT = ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
NEWEST = CURRENT[-1]
KNOWN = (LEGACY, *CURRENT)


class FormatError(InputError):
    """Slurm output of a version or shape the parsers do not know."""


@record
class SlurmFormat:
    """Who wrote a document: ``release`` like ``24.11.5``, ``data_parser`` like ``v0.0.42``."""

    release: str
    data_parser: str
    command: str = "slurm --json"

    @property
    def legacy(self) -> bool:
        return self.data_parser == LEGACY

    def error(self, field: str, value: object, expected: str) -> FormatError:
        shown = repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return FormatError(
            f"slurm: {self.command} of Slurm {self.release} (data_parser {self.data_parser}): "
            f"field {field} = {shown}, expected {expected}; record this output and report it "
            "(`wattctl snapshot --json` shows what wattbatch reads)")


def release_tuple(release: str) -> tuple[int, int]:
    """``"24.11.5"`` -> (24, 11); (0, 0) when unreadable."""
    parts = release.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def detect(doc: object, command: str) -> SlurmFormat:
    """The format of one ``--json`` document printed by ``command`` (e.g. ``squeue --json``):
    a decoded tree or a ``SlurmJson``."""
    if isinstance(doc, SlurmJson):
        doc = doc.head
    if not isinstance(doc, dict):
        raise FormatError(f"slurm: {command} printed {type(doc).__name__}, not a JSON object")
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise FormatError(f"slurm: {command} output has no 'meta' object: not Slurm 22.05 or "
                          "later, or not the output of a Slurm command")
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), dict) else {}
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    release = str(slurm.get("release") or "") if isinstance(slurm, dict) else ""
    if not release and isinstance(slurm, dict) and isinstance(slurm.get("version"), dict):
        v = slurm["version"]
        release = f"{v.get('major')}.{v.get('minor')}.{v.get('micro')}"
    parser = str(plugin.get("data_parser") or plugin.get("type") or "")
    version = parser.rsplit("/", 1)[-1]
    fmt = SlurmFormat(release=release or "?", data_parser=version or "?", command=command)
    if version not in KNOWN:
        raise FormatError(
            f"slurm: {command} of Slurm {fmt.release} wrote data_parser {parser or '(none)'} "
            f"(meta.plugin), which wattbatch does not read; it reads {', '.join(KNOWN)}. "
            f"Ask for a known one with `--json={NEWEST}` or upgrade wattbatch")
    return fmt

