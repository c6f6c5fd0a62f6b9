"""The README's command-line transcript, replayed: every ``$`` command runs in a fresh directory (as
``/tmp/clidemo`` in the README) and prints exactly the lines the README shows after it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "docs" / "guides" / "cli.md"  # the command-line guide


def _transcript() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) for the ```text block that shows ``$ sjsonl verify``."""
    blocks = re.findall(r"```text\n(.*?)```", README.read_text(), flags=re.S)
    block = next(b for b in blocks if "$ sjsonl verify" in b)
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_the_cli_transcript_is_what_the_commands_print(tmp_path):
    where = tmp_path / "clidemo"
    where.mkdir()
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "110"}
    steps = _transcript()
    assert [cmd.split()[0] for cmd, _ in steps] == ["python", "printf", "sjsonl", "sjsonl", "sjsonl"]
    for command, shown in steps:
        done = subprocess.run(
            command, shell=True, cwd=where, env=env, capture_output=True, text=True, timeout=300
        )
        printed = (done.stdout + done.stderr).replace(str(where), "/tmp/clidemo").splitlines()
        assert printed == shown, f"$ {command}"
