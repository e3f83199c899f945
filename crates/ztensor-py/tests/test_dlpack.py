"""DLPack: the package's components and dense objects are DLPack producers, taken by
``torch.from_dlpack``, ``np.from_dlpack`` and JAX (all three real, installed by ``cargo xtask
test``; nothing here is skipped when one is missing: the import fails)."""

from __future__ import annotations

import gc
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.torch
import torch

import ztensor_rs
import ztensor_rs.torch as zt
from conftest import FIXTURES
from test_torch import every_dtype, same

# What NumPy can hold of `every_dtype()`: it has no bfloat16 or FP8 of its own.
NUMPY_HAS = {"f16", "f32", "f64", "c64", "c128", "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"}


def address(component: ztensor_rs.Component) -> int:
    return component.array.ctypes.data


# Every page size a map's address is a multiple of.
PAGE = 4096


@pytest.mark.parametrize("zstd", [None, 3])
def test_torch_takes_every_dtype_without_a_copy(tmp, zstd):
    """Every dtype torch and zTensor share (bfloat16 and all four FP8 included) comes through
    ``torch.from_dlpack`` with its own dtype, shape and bytes, at the address of the component's
    bytes: the file's map when raw, the decoded buffer when compressed."""
    tensors = every_dtype()
    path = tmp / "every.zt"
    zt.save_file(tensors, path, zstd=zstd)
    with ztensor_rs.safe_open(path) as f:
        for name, expected in tensors.items():
            obj = f.get_object(name)
            component = obj.components["data"]
            assert component.zero_copy == (zstd is None), name
            taken = torch.from_dlpack(obj)
            assert same(taken, expected), name
            if expected.numel() and zstd is None:
                # A private map of the file: other pages than the shared map's, the same bytes
                # at the same place in their page (a copy would lie anywhere).
                assert taken.data_ptr() != address(component), name
                assert taken.data_ptr() % PAGE == address(component) % PAGE, name
            elif expected.numel():
                assert taken.data_ptr() == address(component), name
            # The component itself is a producer too (what sparse objects' parts are).
            assert same(torch.from_dlpack(component), expected), name


def test_numpy_takes_what_it_can_hold_read_only_from_a_map(tmp):
    """NumPy honours DLPack 1.0's read-only flag: arrays over a private map of the file are
    read-only; arrays over decoded bytes are writable, and so are copies asked for."""
    tensors = every_dtype()
    raw, packed = tmp / "raw.zt", tmp / "packed.zt"
    zt.save_file(tensors, raw)
    zt.save_file(tensors, packed, zstd=3)
    with ztensor_rs.safe_open(raw) as f, ztensor_rs.safe_open(packed) as g:
        for name in NUMPY_HAS:
            expected = tensors[name].numpy()
            mapped, decoded = f.get_object(name), g.get_object(name)
            a = np.from_dlpack(mapped)
            assert a.dtype == expected.dtype and np.array_equal(a, expected), name
            assert not a.flags.writeable, name
            assert a.ctypes.data % PAGE == address(mapped.components["data"]) % PAGE, name
            b = np.from_dlpack(decoded)
            assert np.array_equal(b, expected) and b.flags.writeable, name
            c = np.from_dlpack(mapped, copy=True)
            assert np.array_equal(c, expected) and c.flags.writeable, name
            assert c.ctypes.data != a.ctypes.data, name
        # NumPy has no bfloat16: it refuses the type by name, it does not get wrong values.
        with pytest.raises((RuntimeError, BufferError, TypeError)):
            np.from_dlpack(f.get_object("bf16"))


def test_jax_takes_every_type_it_has(tmp):
    """JAX asks for DLPack before 1.0, which cannot say read-only: bytes of the map come as a
    private map of the file, decoded bytes as they are; values and dtypes are exact, bfloat16
    and FP8 included (64-bit types are left out: JAX narrows them unless told otherwise,
    process-wide)."""
    tensors = every_dtype()
    for zstd in (None, 3):
        path = tmp / f"jax-{zstd}.zt"
        zt.save_file(tensors, path, zstd=zstd)
        with ztensor_rs.safe_open(path) as f:
            for name in ["bf16", "f16", "f32", "e4m3", "e5m2", "c64", "bool", "i8", "u8", "i32", "4d", "scalar"]:
                expected = tensors[name]
                a = jnp.from_dlpack(f.get_object(name))
                assert str(a.dtype) == str(expected.dtype).removeprefix("torch."), name
                assert a.shape == tuple(expected.shape), name
                got = np.asarray(a).reshape(-1).view(np.uint8)
                want = expected.contiguous().reshape(-1).view(torch.uint8).numpy()
                assert got.tobytes() == want.tobytes(), name


def test_files_other_software_wrote(tmp):
    """A safetensors file ``safetensors.torch`` wrote and the reference writer's zTensor 1.2
    files: what ``torch.from_dlpack`` takes is what their own readers give."""
    # What safetensors holds: no fnuz FP8, no complex128.
    tensors = {k: v for k, v in every_dtype().items() if "fnuz" not in k and k != "c128"}
    path = tmp / "theirs.safetensors"
    safetensors.torch.save_file(tensors, path)
    theirs = safetensors.torch.load_file(path)
    with ztensor_rs.safe_open(path) as f:
        assert sorted(f.keys()) == sorted(theirs)
        for name, tensor in theirs.items():
            assert same(torch.from_dlpack(f.get_object(name)), tensor), name
    for fixture in ["logical-types.zt", "zstd.zt"]:
        fpath = FIXTURES / "producers/v1.2/reference-1.2.3" / fixture
        expected = zt.load_file(fpath)
        with ztensor_rs.safe_open(fpath) as f:
            for name in f.keys():
                obj = f.get_object(name)
                if obj.format != "dense":
                    continue
                assert same(torch.from_dlpack(obj), expected[name]), (fixture, name)


def test_the_bytes_live_as_long_as_a_consumer_holds_them(tmp):
    """The capsule holds the bytes until its consumer lets go, not longer: a tensor outlives
    the file handle and the object it came from, and dropping it gives the reference back.
    Decoded bytes are held by reference; a mapped tensor's private map is the capsule's own,
    and holds nothing of the handle's."""
    tensors = every_dtype()
    mapped = tmp / "mapped.zt"
    zt.save_file(tensors, mapped)
    with ztensor_rs.safe_open(mapped) as m:
        obj = m.get_object("f64")
        held = obj.components["data"]._bytes
        before = sys.getrefcount(held)
        own = torch.from_dlpack(obj)
        assert sys.getrefcount(held) == before
        del obj, held
    gc.collect()
    assert same(own, tensors["f64"])
    path = tmp / "life.zt"
    zt.save_file(tensors, path, zstd=3)
    f = ztensor_rs.safe_open(path)
    obj = f.get_object("f64")
    held = obj.components["data"]._bytes
    before = sys.getrefcount(held)
    taken = torch.from_dlpack(obj)
    assert sys.getrefcount(held) == before + 1
    del obj, held
    f.close()
    del f
    gc.collect()
    assert same(taken, tensors["f64"])
    # A capsule never consumed gives its reference back when it is collected.
    g = ztensor_rs.safe_open(path)
    obj = g.get_object("f32")
    held = obj.components["data"]._bytes
    before = sys.getrefcount(held)
    capsule = obj.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(held) == before + 1
    del capsule
    gc.collect()
    assert sys.getrefcount(held) == before
    taken = torch.from_dlpack(obj)
    del taken
    gc.collect()
    assert sys.getrefcount(held) == before


def test_requests_the_bytes_cannot_meet_are_refused_by_name(tmp):
    """Sparse objects name their components; another device is refused; a copy is writable and
    the file is unchanged; a legacy consumer refusing a copy gets the private map."""
    tensors = every_dtype()
    path = tmp / "refuse.zt"
    zt.save_file(tensors, path)
    original = path.read_bytes()
    with ztensor_rs.safe_open(path) as f:
        obj = f.get_object("f32")
        # A legacy consumer refusing a copy gets the private map: no copy is made.
        legacy = torch.from_dlpack(obj.__dlpack__(copy=False))
        assert same(legacy, tensors["f32"])
        with pytest.raises(BufferError, match="device"):
            obj.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
        assert obj.__dlpack_device__() == (1, 0)
        copy = torch.from_dlpack(obj.__dlpack__(max_version=(1, 0), copy=True))
        copy += 1
        assert same(copy - 1, tensors["f32"])
    assert path.read_bytes() == original
    sparse = FIXTURES / "producers/v1.2/reference-1.2.3/sparse.zt"
    with ztensor_rs.safe_open(sparse) as f:
        for name in f.keys():
            obj = f.get_object(name)
            if obj.format == "dense":
                continue
            with pytest.raises(BufferError, match="export its components"):
                torch.from_dlpack(obj)
            for component in obj.components.values():
                assert torch.from_dlpack(component).numel() == component.array.size


def test_writes_through_dlpack_stay_the_consumers(tmp):
    """A consumer that writes a tensor taken from the file's map (torch ignores DLPack's
    read-only flag) writes pages of its own: no fault, and neither the file, another tensor
    taken from the same handle, a NumPy view, a JAX array nor a new load sees the change."""
    tensors = every_dtype()
    path = tmp / "written.zt"
    zt.save_file(tensors, path)
    original = path.read_bytes()
    with ztensor_rs.safe_open(path) as f:
        view = f.get_object("f32").components["data"].array
        before = jnp.from_dlpack(f.get_object("f32"))
        t = torch.from_dlpack(f.get_object("f32"))
        t.add_(1)
        u = torch.from_dlpack(f.get_object("f32"))
        u.mul_(-1)
        assert same(t - 1, tensors["f32"])
        assert same(-u, tensors["f32"])
        assert same(torch.from_dlpack(f.get_object("f32")), tensors["f32"])
        assert np.array_equal(view, tensors["f32"].numpy())
        assert np.array_equal(np.asarray(before), tensors["f32"].numpy())
        # NumPy keeps to the read-only flag: its array of the same export refuses a write.
        a = np.from_dlpack(f.get_object("f32"))
        with pytest.raises(ValueError):
            a[...] = 0
        # A whole bfloat16 and FP8 tensor written by torch, in place.
        for name in ["bf16", "e4m3", "4d"]:
            w = torch.from_dlpack(f.get_object(name))
            w.zero_()
            assert not w.to(torch.float32).any(), name
            assert same(torch.from_dlpack(f.get_object(name)), tensors[name]), name
    assert path.read_bytes() == original
    assert same(zt.load_file(path)["f32"], tensors["f32"])


def test_a_replaced_file_is_exported_as_a_copy(tmp):
    """A file replaced since it was opened (renamed over, as writers publish) has no private
    map of the file that was opened: its tensors are exported as copies, with the values of
    the file that was opened; refusing a copy is refused, naming why."""
    tensors = every_dtype()
    path, other = tmp / "first.zt", tmp / "second.zt"
    zt.save_file(tensors, path)
    zt.save_file({k: v + 1 if v.dtype == torch.float32 else v for k, v in tensors.items()}, other)
    with ztensor_rs.safe_open(path) as f:
        other.replace(path)
        t = torch.from_dlpack(f.get_object("f32"))
        assert same(t, tensors["f32"])
        t.add_(1)
        assert same(torch.from_dlpack(f.get_object("f32")), tensors["f32"])
        with pytest.raises(BufferError, match="replaced"):
            f.get_object("f32").__dlpack__(max_version=(1, 0), copy=False)
