"""``ztensor_rs.torch``: torch tensors in and out, checked against PyTorch itself and the
``safetensors.torch`` package (both real, installed by ``cargo xtask test``; nothing here is
skipped when they are missing: the import fails)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
import safetensors.torch
import torch

import ztensor_rs
import ztensor_rs.torch as zt
from conftest import FIXTURES


def every_dtype() -> dict[str, torch.Tensor]:
    """A tensor of every dtype torch and zTensor 1.2 share, with values that tell bytes apart."""
    g = torch.Generator().manual_seed(7)
    floats = torch.randn(3, 5, generator=g) * 100
    return {
        "bf16": floats.to(torch.bfloat16),
        "f16": floats.to(torch.float16),
        "f32": floats,
        "f64": floats.to(torch.float64),
        "e4m3": floats.to(torch.float8_e4m3fn),
        "e5m2": floats.to(torch.float8_e5m2),
        "e4m3fnuz": floats.to(torch.float8_e4m3fnuz),
        "e5m2fnuz": floats.to(torch.float8_e5m2fnuz),
        "c64": torch.complex(floats, -floats),
        "c128": torch.complex(floats.double(), floats.double() * 2),
        "bool": floats > 0,
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 1, 255], dtype=torch.uint8),
        "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
        "u16": torch.tensor([0, 65535], dtype=torch.uint16),
        "i32": torch.tensor([-(2**31), 2**31 - 1], dtype=torch.int32),
        "u32": torch.tensor([0, 2**32 - 1], dtype=torch.uint32),
        "i64": torch.tensor([-(2**63), 2**63 - 1], dtype=torch.int64),
        "u64": torch.tensor([0, 2**64 - 1], dtype=torch.uint64),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "4d": torch.arange(120, dtype=torch.int32).reshape(2, 3, 4, 5),
    }


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (NaNs and FP8 compared as bits)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.contiguous(), b.contiguous()
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("zstd", [None, 3])
@pytest.mark.parametrize("digest", [None, "sha256"])
def test_every_dtype_round_trips_exactly(tmp, zstd, digest):
    tensors = every_dtype()
    path = tmp / "all.zt"
    zt.save_file(tensors, path, {"framework": "pt"}, zstd=zstd, digest=digest, threads=2)
    back = zt.load_file(path)
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert same(back[name], tensor), name
    # From bytes, and through safe_open, the same.
    data = zt.save(tensors, zstd=zstd)
    for name, tensor in zt.load(data).items():
        assert same(tensor, tensors[name]), name
    with zt.safe_open(path, framework="pt") as f:
        assert f.metadata() == {"framework": "pt"}
        for name in f.keys():
            assert same(f.get_tensor(name), tensors[name]), name


@pytest.mark.parametrize("version", ["0.1", "1.1"])
def test_older_versions_hold_the_plain_dtypes(tmp, version):
    tensors = {k: v for k, v in every_dtype().items() if k in ("f16", "f32", "f64", "i8", "u8", "i64", "bool", "bf16", "4d")}
    path = tmp / "old.zt"
    zt.save_file(tensors, path, version=version)
    for name, tensor in zt.load_file(path).items():
        assert same(tensor, tensors[name]), name


def test_safetensors_files_load_as_safetensors_torch_loads_them(tmp):
    tensors = {k: v for k, v in every_dtype().items() if k not in ("e4m3fnuz", "e5m2fnuz", "c128")}
    path = tmp / "model.safetensors"
    safetensors.torch.save_file(tensors, str(path), metadata={"format": "pt"})
    theirs = safetensors.torch.load_file(str(path))
    ours = zt.load_file(path)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert same(ours[name], theirs[name]), name
    with safetensors.safe_open(str(path), framework="pt") as a, zt.safe_open(path, framework="pt") as b:
        assert sorted(a.keys()) == b.keys()
        for name in ("f32", "4d", "bf16"):
            sa, sb = a.get_slice(name), b.get_slice(name)
            assert sa.get_shape() == sb.get_shape()
            assert sa.get_dtype() == sb.get_dtype()
            assert same(sa[1:2], sb[1:2]), name
            assert same(sa[:, 1:3], sb[:, 1:3]), name
    # And what we write, safetensors reads.
    out = tmp / "ours.safetensors"
    ztensor_rs.convert(tmp / "model.safetensors", out, to="safetensors")
    for name, tensor in safetensors.torch.load_file(str(out)).items():
        assert same(tensor, tensors[name]), name


def test_raw_tensors_of_a_mapped_file_are_views_of_one_private_map(tmp):
    tensors = {"a": torch.arange(4096, dtype=torch.float32), "b": torch.ones(64, 64, dtype=torch.bfloat16)}
    for name in ("raw.zt", "raw.safetensors"):
        path = tmp / name
        if name.endswith(".zt"):
            zt.save_file(tensors, path)
        else:
            safetensors.torch.save_file(tensors, str(path))
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        loaded = zt.load_file(path)
        a, b = loaded["a"], loaded["b"]
        # One storage, the size of the file: the tensors are views of the file's map.
        assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        assert a.untyped_storage().nbytes() == os.path.getsize(path)
        # Writing into one changes this process's pages only: not the file, not a new load.
        a.add_(1)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert same(zt.load_file(path)["a"], tensors["a"])
        assert torch.equal(a, tensors["a"] + 1)
        # Without the map, copies.
        copied = zt.load_file(path, mmap=False)
        assert copied["a"].untyped_storage().data_ptr() != copied["b"].untyped_storage().data_ptr()
        assert same(copied["b"], tensors["b"])


def test_a_file_replaced_after_opening_is_read_as_it_was_opened(tmp):
    path = tmp / "m.zt"
    first = {"w": torch.full((256,), 1.0)}
    zt.save_file(first, path)
    with zt.safe_open(path, framework="pt") as f:
        # Replaced by rename, as writers publish: the map would be of the new file.
        zt.save_file({"w": torch.full((256,), 2.0)}, path)
        assert same(f.get_tensor("w"), first["w"])


def test_compressed_tensors_are_writable_and_their_own(tmp):
    path = tmp / "z.zt"
    tensors = {"w": torch.arange(100_000, dtype=torch.int64)}
    zt.save_file(tensors, path, zstd=5)
    w = zt.load_file(path)["w"]
    w[0] = -1
    assert w[0] == -1 and same(zt.load_file(path)["w"], tensors["w"])


def test_views_and_shared_storage_save_as_their_values(tmp):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    tensors = {"base": base, "t": base.t(), "col": base[:, 2], "strided": base[::2, ::3], "alias": base}
    path = tmp / "views.zt"
    zt.save_file(tensors, path)
    for name, tensor in zt.load_file(path).items():
        assert tensor.shape == tensors[name].shape
        assert torch.equal(tensor, tensors[name]), name
    # safetensors.torch refuses shared storage; we save each tensor's own values.
    with pytest.raises(RuntimeError):
        safetensors.torch.save_file(tensors, str(tmp / "views.safetensors"))


def test_devices_and_refusals(tmp):
    path = tmp / "d.zt"
    zt.save_file({"w": torch.ones(3)}, path)
    meta = zt.load_file(path, device="meta")["w"]
    assert meta.device.type == "meta" and meta.shape == (3,)
    with zt.safe_open(path, framework="torch", device="meta") as f:
        assert f.get_tensor("w").device.type == "meta"
    with pytest.raises(TypeError):
        zt.save_file({"w": np.ones(3)}, tmp / "x.zt")
    with pytest.raises(ztensor_rs.UnsupportedError), pytest.warns(UserWarning, match="ComplexHalf"):
        zt.save_file({"w": torch.ones(3, dtype=torch.complex32)}, tmp / "x.zt")
    with pytest.raises(ztensor_rs.UnsupportedError):
        zt.save_file({"w": torch.eye(3).to_sparse()}, tmp / "x.zt")
    with pytest.raises(ValueError):
        zt.safe_open(path, framework="numpy")
    assert not (tmp / "x.zt").exists()


def test_files_pytorch_wrote_read_as_torch_load_reads_them():
    """The checkpoints ``torch.save`` wrote (fixtures/external/pytorch, made by its make.py),
    against ``torch.load`` of the same file (run in full: the fixtures are the repository's
    own), tensor by tensor under the dotted names of their place in the pickled structure."""
    checked = 0
    for name in ("checkpoint.pt", "dtypes.pt", "state_dict.pt", "views.pt", "legacy.pt", "protocol4.pt", "parameter.pt"):
        path = FIXTURES / "external" / "pytorch" / name
        theirs = torch.load(path, weights_only=False)
        ours = zt.load_file(path)
        flat: dict[str, torch.Tensor] = {}

        def walk(prefix: str, value: object) -> None:
            if isinstance(value, torch.Tensor):
                flat[prefix] = value
            elif isinstance(value, dict):
                for k, v in value.items():
                    walk(f"{prefix}.{k}" if prefix else str(k), v)
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    walk(f"{prefix}.{i}" if prefix else str(i), v)

        walk("", theirs)
        if list(flat) == [""]:
            # A checkpoint that is one tensor is named after the file.
            flat = {path.stem: flat[""]}
        for key, tensor in flat.items():
            assert key in ours, (name, key, sorted(ours))
            assert same(ours[key], tensor.detach()), (name, key)
            checked += 1
    assert checked >= 30, checked


@pytest.mark.parametrize(
    "fixture",
    [
        "examples/tiny-v0.1.zt",
        "producers/v1.2/reference-1.2.3/logical-types.zt",
        "producers/v1.2/reference-1.2.3/zstd.zt",
        "producers/v2/reference-2.1.1/examples-tiny-v1.2.zt",
        "external/tensorbuffers-sample.tb",
        "external/numpy/dense-c16.npy",
        "external/numpy/big-endian-f8.npy",
        "external/gguf/plain.gguf",
    ],
)
def test_every_format_gives_the_values_numpy_gets(fixture):
    """Files other software wrote, in every format the package reads: the torch tensors hold
    exactly the values of the NumPy arrays the package gives (checked elsewhere against each
    format's own reader)."""
    path = FIXTURES / fixture
    arrays = ztensor_rs.load_file(path)
    tensors = zt.load_file(path)
    assert arrays.keys() == tensors.keys()
    for name, array in arrays.items():
        if not isinstance(array, np.ndarray):
            continue
        tensor = tensors[name]
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        assert tensor.shape == array.shape, name
        assert bytes(tensor.contiguous().reshape(-1).view(torch.uint8).numpy()) == raw.tobytes(), name


def test_sparse_objects_become_sparse_tensors():
    path = FIXTURES / "producers/v1.2/reference-1.2.3/sparse.zt"
    arrays = ztensor_rs.load_file(path)
    tensors = zt.load_file(path)
    seen = set()
    for name, value in arrays.items():
        tensor = tensors[name]
        if hasattr(value, "toarray"):
            assert tensor.layout in (torch.sparse_csr, torch.sparse_coo), name
            assert np.array_equal(tensor.to_dense().numpy(), value.toarray()), name
            seen.add(tensor.layout)
    assert seen == {torch.sparse_csr, torch.sparse_coo}


def test_the_package_level_pt_framework_is_the_torch_module(tmp):
    path = tmp / "p.zt"
    tensors = {"b": torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "e": torch.ones(2).to(torch.float8_e5m2)}
    ztensor_rs.save_file(tensors, path)
    for name, tensor in ztensor_rs.load_file(path, framework="pt").items():
        assert same(tensor, tensors[name])
    with ztensor_rs.safe_open(path, framework="pt") as f:
        assert same(f.get_tensor("b"), tensors["b"])
        assert same(f.get_slice("b")[1:], tensors["b"][1:])
