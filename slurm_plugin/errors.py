"""Exceptions shared by every component. Messages name component, key, value and a fix."""

from __future__ import annotations


class WattError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(WattError):
    """A site configuration value is missing or invalid."""

    def __init__(self, source: str, key: str, value: object, fix: str) -> None:
        self.source, self.key, self.value, self.fix = source, key, value, fix
        shown = repr(value)
        if len(shown) > 300:            # a table (a profile's factors): its start says enough
            shown = shown[:300] + "..."
        super().__init__(f"config: {source}: {key} = {shown}: {fix}")

    def __reduce__(self):       # pickled whole, so one raised in a worker process comes back
        return type(self), (self.source, self.key, self.value, self.fix)


class CommandError(WattError):
    """An external command failed: shows the command, its exit code and stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str, stdout: str = "") -> None:
        self.argv, self.returncode, self.stderr, self.stdout = argv, returncode, stderr, stdout
        shown = " ".join(map(str, argv))
        detail = stderr.strip() or stdout.strip() or "(no output)"
        super().__init__(f"command failed (exit {returncode}): {shown}\n{detail}")

    def __reduce__(self):
        return type(self), (self.argv, self.returncode, self.stderr, self.stdout)


class TelemetryError(WattError):
    """The telemetry store (InfluxDB) is unreachable or answered an error."""


class InputError(WattError):
    """Bad user input (a file, line or field); the message says where."""


class StateError(WattError):
    """The reconciler's state directory (lock, journal, history) cannot be read or written."""
