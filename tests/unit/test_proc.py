"""The one subprocess function decodes any output, UTF-8 or not."""

from __future__ import annotations

import sys

import pytest

from slurm_plugin.errors import CommandError
from slurm_plugin.proc import run

PRINT_BYTES = "import sys; sys.stdout.buffer.write(b'name=\\xff\\xfe ok'); " \
              "sys.stderr.buffer.write(b'err \\xff'); sys.exit({code})"


def test_output_that_is_not_utf8_is_decoded_with_replacement_characters():
    done = run([sys.executable, "-c", PRINT_BYTES.format(code=0)])
    assert done.stdout == "name=\ufffd\ufffd ok" and done.stderr == "err \ufffd"


def test_failure_with_undecodable_output_names_the_command_in_text():
    with pytest.raises(CommandError) as err:
        run([sys.executable, "-c", PRINT_BYTES.format(code=3)])
    assert err.value.returncode == 3 and err.value.stderr == "err \ufffd"
    assert "exit 3" in str(err.value) and "err \ufffd" in str(err.value)


def test_input_with_escaped_bytes_reaches_the_command_as_those_bytes():
    done = run([sys.executable, "-c", "import sys; print(sys.stdin.buffer.read().hex())"],
               input_text="J\udcff\udcfe")
    assert done.stdout.strip() == "4afffe"
