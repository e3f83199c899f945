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


def test_readme_torch_example_runs(tmp):
    text = (REPO / "README.md").read_text()
    section = text.split("### PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's PyTorch section"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        import safetensors.torch
        import torch

        # The example makes every file it reads (nothing is put there for it).
        assert not os.listdir(".")
        scope: dict = {}
        exec(compile(blocks[0], "README.md", "exec"), scope)
        assert torch.equal(scope["top"], scope["sd"]["w"][0:2])
        assert scope["tensors"]["w"].dtype == torch.bfloat16
        # The safetensors file it wrote is one: safetensors' own loader reads it, exactly.
        theirs = safetensors.torch.load_file("model.safetensors")
        assert theirs.keys() == scope["sd"].keys()
        for name, tensor in scope["sd"].items():
            assert theirs[name].dtype == tensor.dtype, name
            assert torch.equal(theirs[name].view(torch.uint8), tensor.view(torch.uint8)), name
        assert scope["again"].keys() == scope["tensors"].keys()
    finally:
        os.chdir(cwd)


def test_readme_dlpack_example_runs(tmp):
    text = (REPO / "README.md").read_text()
    section = text.split("### PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2 and "from_dlpack" in blocks[1], "no DLPack example in the README"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        import torch

        import ztensor_rs.torch

        import numpy as np

        w = torch.randn(4, 4).to(torch.bfloat16)
        fp8 = torch.tensor([0.5, -2.0]).to(torch.float8_e4m3fn)
        scale = torch.tensor([0.25, 4.0])
        ztensor_rs.torch.save_file({"w": w, "fp8": fp8, "scale": scale}, "model.zt")
        scope: dict = {}
        exec(compile(blocks[1], "README.md", "exec"), scope)
        # NumPy: its own types by DLPack, bfloat16 as ml_dtypes through get_tensor; what the
        # README says NumPy refuses, it refuses.
        assert scope["scale"].dtype == np.float32 and scope["scale"].tolist() == [0.25, 4.0]
        assert str(scope["w_np"].dtype) == "bfloat16"
        assert scope["w_np"].view(np.uint16).tolist() == w.view(torch.int16).numpy().view(np.uint16).tolist()
        with ztensor_rs.safe_open("model.zt") as f:
            for name in ["w", "fp8"]:
                try:
                    np.from_dlpack(f.get_object(name))
                except RuntimeError as e:
                    assert "Unsupported dtype" in str(e), e
                else:
                    raise AssertionError(f"NumPy took {name} by DLPack; the README says it does not")
        assert scope["w"].dtype == torch.bfloat16 and torch.equal(scope["w"], w)
        assert str(scope["fp8"].dtype) == "float8_e4m3fn"
        assert torch.equal(scope["mine"], w) and scope["mine"].data_ptr() != scope["w"].data_ptr()
    finally:
        os.chdir(cwd)


def test_the_namespace_is_the_documented_api():
    import ztensor_rs

    # Submodules appear once imported (ztensor_rs.torch, by a test or another import).
    submodules = {"torch"}
    public = {name for name in dir(ztensor_rs) if not name.startswith("_")} - submodules
    assert public == set(ztensor_rs.__all__), public ^ set(ztensor_rs.__all__)
    assert len(ztensor_rs.__all__) == len(set(ztensor_rs.__all__))
    for name in ztensor_rs.__all__:
        assert getattr(ztensor_rs, name).__doc__, name
    # What star-import gives is that list, and nothing the implementation imports.
    scope: dict = {}
    exec("from ztensor_rs import *", scope)
    assert set(scope) - {"__builtins__"} == set(ztensor_rs.__all__)
    assert isinstance(ztensor_rs.__version__, str)


def test_the_torch_namespace_is_its_documented_api():
    import ztensor_rs.torch as pt

    public = {name for name in dir(pt) if not name.startswith("_")}
    # What the module imports for itself: the modules and typing names.
    imported = {"dcp", "os", "warnings", "torch", "annotations", "Any", "Dict", "List", "Mapping", "Optional", "Tuple", "PathLike", "UnsupportedError"}
    assert public - imported == set(pt.__all__), (public - imported) ^ set(pt.__all__)
    assert set(pt.__all__) == {"load_file", "save_file", "load", "save", "safe_open"}
    for name in pt.__all__:
        assert getattr(pt, name).__doc__, name
