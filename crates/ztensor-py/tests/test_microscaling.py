"""FP4, FP6 and the E8M0 scale end to end: safetensors files that ``safetensors.torch`` wrote,
zTensor 2, torch (``float4_e2m1fn_x2``, ``float8_e8m0fnu``) and NumPy (ml_dtypes), every
pair both ways, the bytes exact; zTensor 1.2 refuses them, naming zTensor 2.

The expected codes are derived here from the formats' definitions (E2M1: sign, two exponent
bits of bias 1, one mantissa bit; E8M0: 2^(e-127)), not from this package."""

from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest
import safetensors.torch
import torch

import ztensor_rs
import ztensor_rs.torch as zt_torch


def e2m1(code: int) -> float:
    """The value of a 4-bit E2M1 code, from its definition."""
    sign = -1.0 if code & 0b1000 else 1.0
    exponent, mantissa = (code >> 1) & 0b11, code & 1
    if exponent == 0:
        return sign * mantissa * 0.5
    return sign * 2.0 ** (exponent - 1) * (1 + mantissa / 2)


def header(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def same(got: torch.Tensor, want: torch.Tensor, name: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), name


@pytest.fixture()
def torch_written(tmp_path) -> tuple[pathlib.Path, dict[str, torch.Tensor]]:
    """A file ``safetensors.torch.save_file`` wrote: FP4 pairs, E8M0 scales and a plain tensor."""
    pairs = torch.tensor([[0x21, 0x43], [0x65, 0x87], [0xA9, 0xCB]], dtype=torch.uint8)
    tensors = {
        "w": pairs.view(torch.float4_e2m1fn_x2),
        "scales": torch.tensor([127, 128, 126, 130, 255, 0], dtype=torch.uint8).view(torch.float8_e8m0fnu),
        "bias": torch.arange(6, dtype=torch.bfloat16),
    }
    path = tmp_path / "mx.safetensors"
    safetensors.torch.save_file(tensors, str(path))
    # What safetensors records: FP4 counted in elements, two a byte.
    h = header(path)
    assert (h["w"]["dtype"], h["w"]["shape"]) == ("F4", [3, 4])
    assert (h["scales"]["dtype"], h["scales"]["shape"]) == ("F8_E8M0", [6])
    return path, tensors


def test_a_safetensors_file_torch_wrote_loads_as_safetensors_loads_it(torch_written):
    path, tensors = torch_written
    theirs = safetensors.torch.load_file(str(path))
    ours = zt_torch.load_file(path)
    assert sorted(ours) == sorted(theirs) == sorted(tensors)
    for name in tensors:
        same(ours[name], theirs[name], name)
        same(ours[name], tensors[name], name)
    with ztensor_rs.safe_open(path, framework="pt") as f:
        same(f.get_tensor("w"), tensors["w"], "w")
        info = f.info("w")
    assert list(info["shape"]) == [3, 4]
    assert info["components"]["data"]["type"] == "f4_e2m1"


def test_through_ztensor_2_and_back_nothing_changes(torch_written, tmp_path):
    path, tensors = torch_written
    zt = tmp_path / "mx.zt"
    assert ztensor_rs.convert(path, zt, to="2", zstd=3) == len(tensors)
    assert ztensor_rs.detect(zt) == "ztensor2"
    for name, tensor in zt_torch.load_file(zt).items():
        same(tensor, tensors[name], name)
    back = tmp_path / "back.safetensors"
    assert ztensor_rs.convert(zt, back) == len(tensors)
    assert header(back)["w"] == {**header(path)["w"], "data_offsets": header(back)["w"]["data_offsets"]}
    for name, tensor in safetensors.torch.load_file(str(back)).items():
        same(tensor, tensors[name], name)
    # torch tensors saved straight to zTensor 2 and to safetensors.
    direct = tmp_path / "direct.zt"
    zt_torch.save_file(tensors, direct, version="2")
    for name, tensor in zt_torch.load_file(direct).items():
        same(tensor, tensors[name], name)
    st = tmp_path / "direct.safetensors"
    zt_torch.save_file(tensors, st)
    for name, tensor in safetensors.torch.load_file(str(st)).items():
        same(tensor, tensors[name], name)


def test_numpy_gets_ml_dtypes_values_the_low_nibble_first(torch_written, tmp_path):
    path, tensors = torch_written
    arrays = ztensor_rs.load_file(path)
    w = arrays["w"]
    assert w.dtype == np.dtype(ml_dtypes.float4_e2m1fn) and w.shape == (3, 4)
    codes = tensors["w"].view(torch.uint8).reshape(-1).tolist()
    want = [e2m1(n) for b in codes for n in (b & 0xF, b >> 4)]
    assert w.astype(np.float32).reshape(-1).tolist() == want
    scales = arrays["scales"]
    assert scales.dtype == np.dtype(ml_dtypes.float8_e8m0fnu)
    values = scales.astype(np.float32).tolist()
    assert values[:4] == [1.0, 2.0, 0.5, 8.0] and np.isnan(values[4]) and values[5] == 2.0**-127
    # And back: ml_dtypes arrays saved pack as the file did.
    out = tmp_path / "numpy.zt"
    ztensor_rs.save_file({"w": w, "scales": scales}, out, version="2")
    for name, tensor in zt_torch.load_file(out).items():
        same(tensor, tensors[name], name)


@pytest.mark.parametrize(("name", "bits"), [("float6_e2m3fn", 6), ("float6_e3m2fn", 6), ("float4_e2m1fn", 4)])
def test_an_odd_count_of_packed_elements_round_trips_through_numpy(tmp_path, name, bits):
    kind = getattr(ml_dtypes, name)
    values = np.array([0.5, -1.0, 1.5, 2.0, -0.0, 3.0, 4.0], dtype=np.float32).astype(kind)
    path = tmp_path / "odd.zt"
    ztensor_rs.save_file({"v": values}, path, version="2")
    with ztensor_rs.safe_open(path) as f:
        data = f.info("v")["components"]["data"]
        got = f.get_tensor("v")
    assert got.dtype == np.dtype(kind) and got.tobytes() == values.tobytes()
    # In the file: element i is bits b*i.. of the little-endian bit stream, the bits past the
    # last element zero.
    stored = path.read_bytes()[data["offset"] : data["offset"] + data["stored_length"]]
    assert len(stored) == (7 * bits + 7) // 8
    codes = values.view(np.uint8).astype(int).tolist()
    assert all(c < 1 << bits for c in codes)
    assert int.from_bytes(stored, "little") == sum(c << (bits * i) for i, c in enumerate(codes))
    if name == "float4_e2m1fn":
        # torch's pairs cannot hold an odd count: said, not guessed.
        with pytest.raises(ztensor_rs.UnsupportedError, match="no float4_e2m1fn_x2 form"):
            zt_torch.load_file(path)


def test_zt_1_2_refuses_packed_fp4_naming_zt_2_and_keeps_e8m0(torch_written, tmp_path):
    path, tensors = torch_written
    target = tmp_path / "mx.zt"
    with pytest.raises(ztensor_rs.ZTensorError, match=r"packed f4_e2m1 .* write zTensor 2"):
        ztensor_rs.convert(path, target)
    with pytest.raises(ztensor_rs.ZTensorError, match=r"packed f4_e2m1 .* write zTensor 2"):
        zt_torch.save_file({"w": tensors["w"]}, target)
    assert not target.exists()
    # The E8M0 scales, one byte an element: a 1.2 type name it does not register, kept.
    zt_torch.save_file({"scales": tensors["scales"]}, target)
    with ztensor_rs.safe_open(target, framework="pt") as f:
        assert f.info("scales")["components"]["data"]["type"] == "f8_e8m0"
        same(f.get_tensor("scales"), tensors["scales"], "scales")
    # And 1.2 to 1.2 again, as it is.
    again = tmp_path / "again.zt"
    assert ztensor_rs.convert(target, again, zstd=3) == 1
    same(zt_torch.load_file(again)["scales"], tensors["scales"], "scales")


def test_dlpack_consumers_take_e8m0_and_packed_fp4_at_the_files_bytes(torch_written, tmp_path):
    """DLPack 1.1's FLOAT8_E8M0FNU: torch and JAX take the scales with their own type, at the
    file's bytes. Packed FP4 goes as DLPack's FLOAT4_E2M1FN of two lanes (torch's own export of
    float4_e2m1fn_x2, the one consumer here that takes a 4-bit type): torch takes it as the
    tensor it saved; an odd last dimension, which has no such form, is refused by name."""
    import jax.numpy as jnp

    path, tensors = torch_written
    zt = tmp_path / "mx.zt"
    ztensor_rs.convert(path, zt, to="2")
    with ztensor_rs.safe_open(zt) as f:
        scales = f.get_object("scales")
        taken = torch.from_dlpack(scales)
        same(taken, tensors["scales"], "scales")
        assert str(jnp.from_dlpack(f.get_object("scales")).dtype) == "float8_e8m0fnu"
        w = torch.from_dlpack(f.get_object("w"))
        assert w.dtype == torch.float4_e2m1fn_x2 and w.shape == tensors["w"].shape
        same(w, tensors["w"], "w")
        # Versioned (DLPack 1.x) as well as legacy capsules.
        versioned = f.get_object("w").__dlpack__(max_version=(1, 1))
        same(torch.from_dlpack(versioned), tensors["w"], "w")
    # Seven FP4 values (ml_dtypes'): four bytes, no two-lane form; refused, never misread.
    odd = np.array([0.5, -1.0, 1.5, 2.0, -0.0, 3.0, 4.0], dtype=np.float32).astype(ml_dtypes.float4_e2m1fn)
    path = tmp_path / "odd.zt"
    ztensor_rs.save_file({"v": odd}, path, version="2")
    with ztensor_rs.safe_open(path) as f:
        with pytest.raises(BufferError, match="even last dimension"):
            torch.from_dlpack(f.get_object("v"))


def test_a_1x_fp4_of_one_value_a_byte_is_not_taken_for_pairs(tmp_path):
    """A zTensor 1.2 file may name its own ``f4_e2m1``, one value a byte (the corpus has one):
    torch is told it has no ``float4_e2m1fn_x2`` form, not given pairs that are not there;
    NumPy sees its bytes; and it converts to 1.2 again as it is."""
    from conftest import FIXTURES

    path = FIXTURES / "v1.2" / "valid" / "logical-f4_e2m1.zt"
    with ztensor_rs.safe_open(path) as f:
        info = f.info("x")
        assert (info["components"]["data"]["type"], list(info["shape"])) == ("f4_e2m1", [3])
        assert f.get_tensor("x").tolist() == [1, 2, 3]
    with pytest.raises(ztensor_rs.UnsupportedError, match="not two values a byte"):
        zt_torch.load_file(path)
    again = tmp_path / "again.zt"
    assert ztensor_rs.convert(path, again) == 1
    with ztensor_rs.safe_open(again) as f:
        assert f.info("x")["components"]["data"]["type"] == "f4_e2m1"
        assert f.get_tensor("x").tolist() == [1, 2, 3]


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"])
def test_cat_and_extract_widen_packed_fp4_and_fp6_as_ml_dtypes_reads_them(name, tmp_path):
    """Every code of the type, and one more (a count that leaves padding bits in the last
    byte), saved packed in zTensor 2: ``ztensor cat`` prints and ``ztensor extract`` writes
    the values ml_dtypes gives them, widened to f32."""
    import subprocess

    from test_registry import cli

    kind = getattr(ml_dtypes, name)
    bits = 4 if "float4" in name else 6
    codes = np.concatenate([np.arange(1 << bits, dtype=np.uint8), np.array([3], dtype=np.uint8)])
    values = codes.view(kind)
    want = values.astype(np.float32)
    path = tmp_path / "v.zt"
    ztensor_rs.save_file({"v": values}, path, version="2")
    shown = subprocess.run([str(cli()), "cat", "--json", "--limit", "0", str(path), "v"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    printed = np.array(json.loads(shown.stdout)["values"], dtype=np.float32)
    assert printed.shape == want.shape
    np.testing.assert_array_equal(printed, want)
    out = tmp_path / "v.npy"
    done = subprocess.run([str(cli()), "extract", str(path), "v", "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    extracted = np.load(out)
    assert extracted.dtype == np.float32
    np.testing.assert_array_equal(extracted, want)


@pytest.mark.parametrize("name, code", [("float6_e2m3fn", 15), ("float6_e3m2fn", 16)])
def test_packed_fp6_goes_out_over_dlpack_as_dlpack_1_1_describes_it(name, code, tmp_path):
    """No consumer here takes a six-bit type (torch has none, NumPy's DLPack refuses it), so
    the capsule is read as the DLPack 1.1 header describes one: FLOAT6_E2M3FN (15) or
    FLOAT6_E3M2FN (16), six bits, one lane, the shape counting elements, the bytes the file's
    packed ones."""
    import ctypes

    class DataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class Device(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]

    class Tensor(ctypes.Structure):
        _fields_ = [
            ("data", ctypes.c_void_p),
            ("device", Device),
            ("ndim", ctypes.c_int32),
            ("dtype", DataType),
            ("shape", ctypes.POINTER(ctypes.c_int64)),
            ("strides", ctypes.POINTER(ctypes.c_int64)),
            ("byte_offset", ctypes.c_uint64),
        ]

    pointer = ctypes.pythonapi.PyCapsule_GetPointer
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    codes = np.arange(64, dtype=np.uint8)[:, None].repeat(2, axis=1)[:13]  # 13 x 2: 26 elements
    values = codes.view(getattr(ml_dtypes, name))
    path = tmp_path / "v.zt"
    ztensor_rs.save_file({"v": values}, path, version="2")
    with ztensor_rs.safe_open(path) as f:
        data = f.info("v")["components"]["data"]
        stored = path.read_bytes()[data["offset"] : data["offset"] + data["stored_length"]]
        capsule = f.get_object("v").__dlpack__()
        tensor = Tensor.from_address(pointer(capsule, b"dltensor") + 0)
        assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (code, 6, 1)
        assert [tensor.shape[i] for i in range(tensor.ndim)] == [13, 2]
        assert ctypes.string_at(tensor.data + tensor.byte_offset, len(stored)) == stored
        assert len(stored) == (26 * 6 + 7) // 8
        del capsule
