"""Who wrote a progress point: signatures with a per-job key only the job's owner can read.

Anyone who can reach InfluxDB can write a ``job_progress`` point for any job id. So a point
counts only when it carries ``sig``, an HMAC-SHA256 of its job id, time (whole milliseconds)
and every field, made with the job's key:

    job key = HMAC-SHA256(site key, "wattbatch-progress:" + job id)

The site key (``progress.site_key_file``) is readable by root only, on the nodes and where
``wattctl reconcile`` runs. The prolog (root) derives the job key and writes it to
``<progress.job_key_dir>/<job id>.key``, mode 0400, owned by the job's user; the epilog
removes it. ``report_progress`` signs with that file; the reader derives the key again and
checks. Another user can neither read the file nor derive the key, so a forged point is
never attributed to the job. (The job's owner can still claim more progress for their own job:
that is bounded by the GPUs' measured utilisation, see ``telemetry.readers``.)

With ``progress.site_key_file`` empty, points are not checked (a site without the prolog).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from typing import Any, Mapping

from .errors import ConfigError, InputError

SIG_FIELD = "sig"
_CONTEXT = b"wattbatch-progress:"


def job_key(site_key: bytes, job_id: str) -> bytes:
    return hmac.new(site_key, _CONTEXT + job_id.encode(), hashlib.sha256).digest()


def _canonical(job_id: str, time_ms: int, fields: Mapping[str, Any]) -> bytes:
    parts = [job_id, str(time_ms)]
    for name in sorted(fields):
        value = fields[name]
        if name == SIG_FIELD or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(float(value)):
            parts.append(f"{name}={value!r}")     # never matches what a signer wrote
        else:
            parts.append(f"{name}={float(value)!r}")
    return "|".join(parts).encode()


def sign(key: bytes, job_id: str, time_s: float, fields: Mapping[str, Any]) -> str:
    """The ``sig`` of a point at ``time_s`` (taken to the millisecond: the signer writes the
    point at that time) with these numeric fields."""
    return hmac.new(key, _canonical(job_id, round(time_s * 1000), fields),
                    hashlib.sha256).hexdigest()


def verify(key: bytes, job_id: str, time_s: float, fields: Mapping[str, Any]) -> bool:
    sig = fields.get(SIG_FIELD)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign(key, job_id, time_s, fields))


def read_key_file(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            key = fh.read().strip()
    except OSError as exc:
        raise InputError(f"progress: {what} {path}: {exc.strerror}") from None
    if len(key) < 16:
        raise InputError(f"progress: {what} {path}: {len(key)} bytes, expected at least 16 "
                         "(create it with: head -c 32 /dev/urandom | base64 > FILE)")
    return key


def job_key_path(key_dir: str, job_id: str) -> str:
    if not job_id.replace("_", "").isdigit():
        raise InputError(f"progress: job id {job_id!r} is not a Slurm job id")
    return os.path.join(key_dir, f"{job_id}.key")


def write_job_key(site_key_file: str, key_dir: str, job_id: str, uid: int, gid: int) -> str:
    """Prolog (root): the job's key file, readable by the job's user only; its path."""
    if not site_key_file:
        raise ConfigError("site config", "progress.site_key_file", site_key_file,
                          "set it to a root-only file of random bytes to sign progress")
    key = job_key(read_key_file(site_key_file, "site key"), job_id)
    os.makedirs(key_dir, mode=0o711, exist_ok=True)
    path = job_key_path(key_dir, job_id)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    try:
        os.write(fd, key.hex().encode())
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def remove_job_key(key_dir: str, job_id: str) -> None:
    """Epilog (root)."""
    try:
        os.unlink(job_key_path(key_dir, job_id))
    except FileNotFoundError:
        pass


class Verifier:
    """The reader's check: ``ok(job_id, time_s, fields)``; job keys derived once each."""

    def __init__(self, site_key: bytes) -> None:
        self.site_key = site_key
        self._keys: dict[str, bytes] = {}

    def ok(self, job_id: str, time_s: float, fields: Mapping[str, Any]) -> bool:
        if job_id not in self._keys:
            self._keys[job_id] = job_key(self.site_key, job_id).hex().encode()
        return verify(self._keys[job_id], job_id, time_s, fields)
