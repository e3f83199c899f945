"""The README's Python example runs as written."""

from __future__ import annotations

import os
import re

from conftest import REPO


def test_readme_python_example_runs(tmp, capsys):
    text = (REPO / "README.md").read_text()
    section = text.split("## Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's Python section"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        exec(compile(blocks[0], "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "zTensor 1.2 ['b', 'w'] {'format': 'np'}"
    assert out[1] == "[4. 5.]"
    assert out[2] == "f32"
