"""The README's Python blocks run exactly as written (in a temp directory), in order."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "50000" and out[1] == "10929 49999"
    assert "tensor(True)" in out  # the StatefulDataLoader example resumed exactly
    assert "[{'id': 1, 'meta': {'lang': 'en'}}, {'id': 2, 'meta': {'lang': 'fr'}}, {'id': 3}]" in out
    assert "Row(id=1, text='a long text')" in out
    assert "19997 [700, 200, 100]" in out and "64 True" in out  # the mixture: exact shares, resumed batches
    assert "['id', 'messages', 'score', 'text'] 50000" in out  # the MindSpore example: one split, bare
    assert (tmp_path / "data.index.npy").exists()
