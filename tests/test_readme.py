"""The README's and the guides' Python blocks run exactly as written (in a temp directory), in order, and
print what the README says they print — every printed value is checked: those the README shows (in a comment
after the ``print`` or on the line below it) as shown, the others against values computed here from the data
file's bytes and the shuffle's specification."""

from __future__ import annotations

import builtins
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from ._cluster_data import need_ray
from ._reference_order import reference_order

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The README's quickstart, then the guides' Python blocks in the order the site shows them (mkdocs.yml's
#: nav): one session, as a reader following them would run it.
GUIDES = ["records", "training-order", "mixtures", "mindspore-hf", "migration", "trainers", "packing",
          "compressed-remote", "object-storage", "large-corpora", "clusters", "cli",
          "reliability"]  # fmt: skip
DOCS = [README, *(REPO / "docs" / "guides" / f"{name}.md" for name in GUIDES)]

#: What each ``print`` of the README prints, in order: the value the README shows, or None for a print
#: whose output the README does not show (checked below against values computed from the data).
SHOWN = [
    "50000",
    "10929 49999",
    None,  # ds[:2], ds.raw(0)[:20]
    None,  # len(part), part[0]["id"]
    None,  # the first ids of a DistributedSampler batch
    "[{'id': 1, 'meta': {'lang': 'en'}}, {'id': 2, 'meta': {'lang': 'fr'}}, {'id': 3}]",
    "Row(id=1, text='a long text')",
    "tensor(True)",
    "50000 True",
    "19997 [700, 200, 100]",
    "64 True",
    "['id', 'messages', 'score', 'text'] 50000",
    "2",
    "2",
    "['input_ids', 'labels', 'position_ids', 'seq_lengths']",
    "True True",
    "True",
    "2",
    "2",
    "True",  # packing guide: pack_stream
    "0 1",
    "10929 50000",
]


def print_calls(blocks: list[str]) -> list[tuple[int, int, str]]:
    """Each ``print(`` line of the README's blocks: (block, line in the block, the README's comment on it
    or, when it has none, on the line below)."""
    out = []
    for b, block in enumerate(blocks):
        lines = block.splitlines()
        for n, line in enumerate(lines, start=1):
            if not line.lstrip().startswith("print("):
                continue
            comment = line.split("#", 1)[1] if "#" in line else ""
            if not comment and n < len(lines) and lines[n].lstrip().startswith("#"):
                comment = lines[n].split("#", 1)[1]
            out.append((b, n, comment.strip()))
    return out


@pytest.fixture
def ray_tmpdir(monkeypatch):
    """The clusters guide starts Ray: its session files go to a short temp directory (Ray's socket paths
    must stay under 108 bytes), removed after."""
    need_ray()
    path = tempfile.mkdtemp(prefix="ray-")
    monkeypatch.setenv("RAY_TMPDIR", path)
    yield path
    if "ray" in sys.modules:  # a block that failed left Ray running: stop it before its files go
        sys.modules["ray"].shutdown()
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow  # trains two tiny models and loads MindSpore: about a minute
def test_readme_python_blocks_run_and_print_what_they_say(tmp_path, monkeypatch, ray_tmpdir):
    import torch  # the README's blocks use it: formats the printed tensor here

    blocks = [b for doc in DOCS for b in re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)]
    calls = print_calls(blocks)
    assert len(calls) == len(SHOWN), "a print was added to or removed from the README: update SHOWN"
    for (_, _, comment), shown in zip(calls, SHOWN):
        # the README shows the value the test expects (or no value, where the test computes it)
        assert (shown is not None and comment.startswith(shown)) or (
            shown is None and not comment[:1].isdigit()
        )
    printed: dict[tuple[int, int], list[str]] = {}

    def recorder(block: int):
        def print_(*args, sep=" ", end="\n", file=None, flush=False):
            if file is not None:
                return builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
            printed.setdefault((block, sys._getframe(1).f_lineno), []).append(sep.join(map(str, args)))

        return print_

    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for b, block in enumerate(blocks):
        namespace["print"] = recorder(b)
        exec(compile(block, str(README), "exec"), namespace)
    assert sorted(printed) == [(b, n) for b, n, _ in calls] and all(len(v) == 1 for v in printed.values())
    outputs = [printed[(b, n)][0] for b, n, _ in calls]
    for out, shown in zip(outputs, SHOWN):
        if shown is not None:
            assert out == shown
    # the prints the README does not show, from the file's bytes and the order's specification
    lines = (tmp_path / "data.jsonl").read_bytes().splitlines()
    assert outputs[2] == f"{[json.loads(lines[0]), json.loads(lines[1])]} {lines[0][:20]}"
    first_of_part = reference_order(50_000, seed=0, epoch=1, positions=[0])[0]  # shard 0 starts the order
    assert outputs[3] == f"12500 {json.loads(lines[first_of_part])['id']}" and first_of_part == 42488
    ids = [json.loads(lines[i])["id"] for i in reference_order(50_000, seed=0, positions=[0, 2, 4, 6])]
    assert outputs[4] == str(torch.tensor(ids))  # rank 0 of 2: positions 0, 2, 4, 6 of epoch 0's order
    assert (tmp_path / "data.index.npy").exists()
