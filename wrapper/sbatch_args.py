"""Read sbatch's command line and ``#SBATCH`` lines exactly as sbatch does (22.05 to 26.05).

Command line (getopt_long in "+" mode): options up to the first non-option word, which is the
script path; every word after it is a script argument. ``--opt=V``, ``--opt V``, ``-xV``,
``-x V``, combined flags (``-Hv``), unique prefixes of long names (``--part=gpu``), ``--`` ends
the options and a lone ``:`` separates heterogeneous job components. Options that take an
optional value take it only when attached (``--exclusive=user``, ``-koff``).

Script (checked against sbatch 22.05.8): only lines starting at column 0 with ``#SBATCH`` (or the
deprecated ``#SLURM``) count, up to the first line that is neither blank nor a comment. A line
may hold several options; words split on blanks, ``'`` and ``"`` quote, ``\\`` escapes the next
character, an unquoted ``#`` starts a comment. The command line wins over the script.

wattbatch's own options (``--wb-*``, see :mod:`wrapper.wb_options`) are taken out of the command
line here; ``#WATTBATCH`` lines follow the same placement rule as ``#SBATCH`` lines (and are
all read even below an ``#SBATCH`` line sbatch rejects: one may ask for a dry run).
"""

from __future__ import annotations

from slurm_plugin.record import field, record

from .options import Opt, OptionLookupError, lookup_long, lookup_short

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Callable

WB_PREFIX = "--wb-"
WRAP_SCRIPT = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{}\n"


class SbatchSyntaxError(ValueError):
    """Something sbatch itself rejects: wattbatch hands it to sbatch to report."""


@record
class OptUse:
    """One option as given: where it came from (``line`` 0 = command line) and its value."""

    opt: Opt
    value: str | None
    line: int = 0
    span: tuple[int, int] = (0, 0)     # argv[start:end] that spelled it (command line only)


@record(frozen=False)
class CommandLine:
    uses: list[OptUse] = field(default_factory=list)
    option_words: list[str] = field(default_factory=list)   # argv before the script, no --wb-*
    wb_words: list[tuple[str, str | None]] = field(default_factory=list)
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    double_dash: bool = False
    opt_end: int = 0                   # argv index where the script (or "--") starts
    wb_indexes: set[int] = field(default_factory=set)
    hetjob: bool = False
    error: str = ""                    # set when sbatch would reject the command line (the
                                       # first fault; no option after it is in ``uses``)


def _wb_word(argv: list[str], i: int, takes_value: Callable[[str], bool]) -> tuple[str, str | None, int]:
    word = argv[i][len(WB_PREFIX):]
    name, eq, value = word.partition("=")
    if eq:
        return name, value, i + 1
    if takes_value(name) and i + 1 < len(argv):
        return name, argv[i + 1], i + 2
    return name, None, i + 1


def parse_command_line(argv: list[str], wb_takes_value: Callable[[str], bool]) -> CommandLine:
    """Split ``argv`` (without the program name). ``wb_takes_value(name)`` says whether a
    ``--wb-NAME`` option reads the next word as its value."""
    out = CommandLine()
    i, n = 0, len(argv)
    while i < n:
        word = argv[i]
        if word.startswith(WB_PREFIX):
            name, value, nxt = _wb_word(argv, i, wb_takes_value)
            out.wb_indexes.update(range(i, nxt))
            i = nxt
            out.wb_words.append((name, value))
            continue
        if word == "--":
            out.double_dash = True
            out.opt_end = i
            i += 1
            break
        if word == ":":
            out.hetjob = True
            out.option_words.append(word)
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            out.opt_end = i
            break
        try:
            uses, nxt = _parse_option(argv, i)
        except SbatchSyntaxError as exc:
            # sbatch stops at the first; getopt goes on past the word, so the script and any
            # --wb-* word after it are still found (either may ask for a dry run)
            out.error = out.error or str(exc)
            uses, nxt = [], i + 1
        if not out.error:
            out.uses.extend(uses)
        out.option_words.extend(argv[i:nxt])
        i = nxt
    else:
        out.opt_end = n
    if i < n:
        out.script, out.script_args = argv[i], argv[i + 1:]
    return out


def _parse_option(argv: list[str], i: int) -> tuple[list[OptUse], int]:
    word = argv[i]
    try:
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            opt = lookup_long(name)
            if opt.arg == "none":
                if eq:
                    raise SbatchSyntaxError(f"option '--{opt.name}' doesn't allow an argument")
                return [OptUse(opt, None, span=(i, i + 1))], i + 1
            if eq or opt.arg == "optional":
                return [OptUse(opt, value if eq else None, span=(i, i + 1))], i + 1
            if i + 1 >= len(argv):
                raise SbatchSyntaxError(f"option '--{opt.name}' requires an argument")
            return [OptUse(opt, argv[i + 1], span=(i, i + 2))], i + 2
        uses: list[OptUse] = []
        j = 1
        while j < len(word):
            opt = lookup_short(word[j])
            rest = word[j + 1:]
            if opt.arg == "none":
                uses.append(OptUse(opt, None, span=(i, i + 1)))
                j += 1
                continue
            if rest or opt.arg == "optional":
                uses.append(OptUse(opt, rest or None, span=(i, i + 1)))
                return uses, i + 1
            if i + 1 >= len(argv):
                raise SbatchSyntaxError(f"option requires an argument -- '{word[j]}'")
            uses.append(OptUse(opt, argv[i + 1], span=(i, i + 2)))
            return uses, i + 2
        return uses, i + 1
    except OptionLookupError as exc:
        raise SbatchSyntaxError(str(exc)) from None


def split_directive(text: str) -> list[str]:
    """Words of one ``#SBATCH`` line after the magic word, as sbatch splits them."""
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return words
        buf: list[str] = []
        quote = ""
        escaped = False
        while i < n and (quote or not text[i].isspace()):
            ch = text[i]
            if escaped:
                buf.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif not quote and ch == "#":
                i = n
                break
            elif ch == quote:
                quote = ""
            elif not quote and ch in "\"'":
                quote = ch
            else:
                buf.append(ch)
            i += 1
        if quote:
            raise SbatchSyntaxError(f"Unmatched `{quote}`")
        if buf:
            words.append("".join(buf))


def header_end(lines: list[str]) -> int:
    """Index of the first command line (neither blank nor a comment); ``len(lines)`` if none.

    sbatch reads ``#SBATCH`` lines only above it, and so does wattbatch for ``#WATTBATCH``."""
    for k, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped and not stripped.startswith("#"):
            return k
    return len(lines)


@record(frozen=False)
class ScriptHeader:
    uses: list[OptUse] = field(default_factory=list)
    wb_lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text after)
    error: str = ""


def parse_script(text: str) -> ScriptHeader:
    """``#SBATCH``/``#SLURM`` options and ``#WATTBATCH`` lines of the first job component."""
    out = ScriptHeader()
    lines = text.split("\n")
    for k, line in enumerate(lines[:header_end(lines)], start=1):
        if line.startswith("#WATTBATCH"):
            out.wb_lines.append((k, line[len("#WATTBATCH"):]))
            continue
        if out.error:
            continue
        for magic in ("#SBATCH", "#SLURM"):
            if line.startswith(magic):
                break
        else:
            continue
        if "hetjob" in line or "packjob" in line:
            break                               # later components: not the policy's concern
        try:
            words = split_directive(line[len(magic):])
            pos = 0
            while pos < len(words):
                if not words[pos].startswith("-") or words[pos] == "-":
                    raise SbatchSyntaxError(f"Invalid directive found in batch script: {words[pos]}")
                uses, nxt = _parse_option(words, pos)
                out.uses.extend(OptUse(u.opt, u.value, line=k) for u in uses)
                pos = nxt
        except SbatchSyntaxError as exc:
            out.error = f"line {k}: {exc}"
    return out
