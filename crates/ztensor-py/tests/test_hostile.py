"""Every file of the hostile corpus (`fixtures/hostile/`, `fixtures/external/*/hostile/`), read
whole by the Python package in a child interpreter under an address-space cap and a time limit:
it ends with its tensors or a ZTensorError, never a crash, an abort or a hang."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import FIXTURES

HOSTILE = sorted(
    [p for p in (FIXTURES / "hostile").iterdir() if p.suffix == ".zt"]
    + list((FIXTURES / "external").glob("*/hostile/*"))
)
# What a real machine gives, far below what the files claim (8 GiB, 3 GiB).
ADDRESS_SPACE = 4 << 30

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
import ztensor_rs
try:
    for mmap in (True, False):
        tensors = ztensor_rs.load_file(sys.argv[1], mmap=mmap)
        for name in ztensor_rs.safe_open(sys.argv[1]).keys():
            ztensor_rs.safe_open(sys.argv[1]).info(name)
    print("read", len(tensors))
except ztensor_rs.ZTensorError as e:
    print("refused", e.rule)
"""


@pytest.mark.parametrize("path", HOSTILE, ids=[p.name for p in HOSTILE])
def test_hostile_file_ends_cleanly(path):
    assert HOSTILE, "the hostile corpus is missing"
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(cap=ADDRESS_SPACE), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    said = child.stdout.split()
    assert said and said[0] in ("read", "refused"), child.stdout + child.stderr[-2000:]
