"""One Slurm ``--json`` document as read: the typed records (``decode``) or, where its shape is
not the foreseen one, the ``json`` tree.

``parse.parse_jobs`` / ``parse_nodes`` (and so ``snapshot.build_cluster`` and ``describe``)
take a ``SlurmJson`` or a decoded tree (a dict) alike and give the same model: a ``SlurmJson``
is read through ``typed_dialects`` and, where any record does not read that way, read again
from its ``json`` tree with ``dialects``, so its warnings and errors are theirs word for word.
The text is kept until the document is dropped, for that second reading.
"""

from __future__ import annotations

import json
import mmap
import os
from typing import Any, Mapping

from ..gc_pause import gc_paused

_UNREAD = object()


class SlurmJson:
    """``text`` (a command's stdout, a file's bytes) decoded; ``ValueError`` (as ``json.loads``
    raises it) when it is not JSON."""

    __slots__ = ("text", "typed", "_tree")

    def __init__(self, text: str | bytes | mmap.mmap) -> None:
        from .decode import decode
        self.text = text            # bytes as they are: msgspec reads UTF-8 (``_loads`` then
        #                             reads them as json did, UnicodeDecodeError and all)
        with gc_paused():
            self.typed = decode(text)
        self._tree: Any = _UNREAD if self.typed is not None else _loads(text)

    @classmethod
    def from_output(cls, raw: bytes) -> SlurmJson:
        """A command's output as it wrote it: decoded from its bytes where they are UTF-8
        (no text copy of hundreds of MB); else as its text, undecodable bytes as U+FFFD (a job
        name any user can set), as ``proc`` decodes every output."""
        from .decode import decode
        with gc_paused():
            typed = decode(raw)
        if typed is None:
            return cls(raw.decode("utf-8", "replace"))
        doc = cls.__new__(cls)
        doc.text, doc.typed, doc._tree = raw, typed, _UNREAD
        return doc

    @classmethod
    def from_file(cls, path: str) -> SlurmJson:
        """The document in the file at ``path``, decoded from the file's pages as they are
        (mapped: no copy of hundreds of MB read first); ``OSError`` when it cannot be read."""
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return cls(b"")
            return cls(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))

    @property
    def tree(self) -> Any:
        """The document as ``json.loads`` gives it (decoded on first use)."""
        if self._tree is _UNREAD:
            self._tree = _loads(self.text)
        return self._tree

    @property
    def head(self) -> Mapping[str, Any]:
        """What ``formats.detect`` reads: ``{"meta": ...}``, or the whole tree."""
        if self.typed is None:
            return self.tree
        raw = self.typed.meta
        return {"meta": json.loads(bytes(raw)) if raw else None}

    @property
    def errors(self) -> Any:
        """The document's ``errors`` (None when absent)."""
        if self.typed is None:
            return self.tree.get("errors")
        raw = self.typed.errors
        return json.loads(bytes(raw)) if raw else None


def _text(raw: bytes) -> str | bytes:
    """Bytes as ``json`` reads them here: ASCII as they are, else UTF-8 decoded
    (``UnicodeDecodeError``, a ValueError, as reading the file did)."""
    return raw if raw.isascii() else raw.decode("utf-8")


def _loads(text: str | bytes | mmap.mmap) -> Any:
    if not isinstance(text, str):
        text = _text(bytes(text))
    with gc_paused():
        return json.loads(text)
