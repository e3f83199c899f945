"""Writing and reading back through NumPy, the safetensors package, and the optional
ml_dtypes / scipy / torch paths."""

from __future__ import annotations

import gc
import json
import sys
import threading

import numpy as np
import pytest

import ztensor_rs
from conftest import FIXTURES, REPO

DTYPES = ["f8", "f4", "f2", "i8", "i4", "i2", "i1", "u8", "u4", "u2", "u1", "?", "c8", "c16"]


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        values = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    elif dt.kind == "c":
        values = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    else:
        values = rng.standard_normal(n).astype(dt)
    return values.reshape(shape)


def tensors() -> dict[str, np.ndarray]:
    out = {f"t_{d}": sample(d, (3, 5), i) for i, d in enumerate(DTYPES)}
    out["scalar"] = np.float32(2.5)
    out["empty"] = np.zeros((0, 7), np.int32)
    out["big_endian"] = np.arange(6, dtype=">i4").reshape(2, 3)
    out["strided"] = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    return out


def assert_same(a: np.ndarray, b: np.ndarray) -> None:
    b = np.asarray(b)
    assert a.shape == b.shape
    assert a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") or a.dtype.kind == b.dtype.kind
    np.testing.assert_array_equal(a, b.astype(a.dtype.newbyteorder("=")))


@pytest.mark.parametrize("version", ["1.2", "1.1", "0.1"])
@pytest.mark.parametrize("zstd", [None, 3])
@pytest.mark.parametrize("digest", [None, "crc32c", "sha256", "blake3"])
def test_numpy_round_trip(tmp, version, zstd, digest):
    data = tensors()
    if version != "1.2":
        # Complex numbers are a 1.2 logical type.
        data = {k: v for k, v in data.items() if np.asarray(v).dtype.kind != "c"}
    path = tmp / "t.zt"
    meta = None if version == "0.1" else {"k": "v"}  # v0.1 has no file attributes
    ztensor_rs.save_file(data, path, metadata=meta, version=version, zstd=zstd, digest=digest)
    back = ztensor_rs.load_file(path)
    assert back.keys() == data.keys()
    for name, value in data.items():
        assert_same(np.asarray(value), back[name])
        assert not back[name].flags.writeable
    # The same bytes from `save`, whatever the thread count.
    one = ztensor_rs.save(data, metadata=meta, version=version, zstd=zstd, digest=digest, threads=1)
    two = ztensor_rs.save(data, metadata=meta, version=version, zstd=zstd, digest=digest, threads=2)
    assert one == two == path.read_bytes()
    with ztensor_rs.safe_open(path) as f:
        assert f.metadata() == meta
        assert f.format == f"zTensor {version}"
    if version == "0.1":
        with pytest.raises(ztensor_rs.FormatError) as caught:
            ztensor_rs.save(data, metadata={"k": "v"}, version=version)
        assert caught.value.rule == "unrepresentable"


def test_digest_is_recorded_and_checked(tmp):
    path = tmp / "d.zt"
    ztensor_rs.save_file({"w": np.arange(1000, dtype=np.float32)}, path, digest="sha256")
    with ztensor_rs.safe_open(path) as f:
        assert f.info("w")["components"]["data"]["digest"].startswith("sha256:")
        offset = f.info("w")["components"]["data"]["offset"]
    raw = bytearray(path.read_bytes())
    raw[offset + 10] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ztensor_rs.FormatError) as caught:
        ztensor_rs.safe_open(path).get_tensor("w")
    assert caught.value.rule == "digest_mismatch"
    assert caught.value.object == "w"
    assert caught.value.filename == str(path)
    assert str(caught.value).startswith(f"{path}: ")


@pytest.mark.parametrize("version", ["0.1", "1.2", "2"])
def test_a_file_cut_short_is_named_with_its_likely_cause(tmp, version):
    path = tmp / "cut.zt"
    tensors = {"w": np.arange(1000, dtype=np.float32)}
    if version == "2":
        ztensor_rs.save_file(tensors, tmp / "one.zt")
        ztensor_rs.convert(tmp / "one.zt", path, to="2")
    else:
        ztensor_rs.save_file(tensors, path, version=version)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 5])
    for opening in (ztensor_rs.load_file, ztensor_rs.safe_open):
        with pytest.raises(ztensor_rs.FormatError) as caught:
            opening(path)
        said = str(caught.value)
        assert caught.value.filename == str(path)
        assert said.startswith(f"{path}: "), said
        assert "cut short (an incomplete download or copy?)" in said, said
    # Bytes given have no file to name, and the cause is still said.
    with pytest.raises(ztensor_rs.FormatError) as caught:
        ztensor_rs.load(whole[: len(whole) - 5])
    assert caught.value.filename is None
    assert "cut short" in str(caught.value)


def test_zero_copy_arrays_borrow_the_map_and_outlive_the_file(tmp):
    path = tmp / "z.zt"
    w = np.arange(4096, dtype=np.float32).reshape(64, 64)
    ztensor_rs.save_file({"w": w, "z": w}, path)
    f = ztensor_rs.safe_open(path)
    obj = f.get_object("w")
    assert obj.components["data"].zero_copy
    array = f.get_tensor("w")
    assert not array.flags.owndata and not array.flags.writeable
    with pytest.raises(ValueError):
        array[0, 0] = 1.0
    f.close()
    del f, obj
    gc.collect()
    np.testing.assert_array_equal(array, w)
    with pytest.raises(ValueError):
        ztensor_rs.safe_open(path).close() or None
        closed = ztensor_rs.safe_open(path)
        closed.close()
        closed.keys()
    # Compressed tensors are decoded into memory of their own.
    ztensor_rs.save_file({"w": w}, path, zstd=1)
    with ztensor_rs.safe_open(path) as f:
        assert not f.get_object("w").components["data"].zero_copy
        np.testing.assert_array_equal(f.get_tensor("w"), w)
    # mmap=False copies everything.
    ztensor_rs.save_file({"w": w}, path)
    with ztensor_rs.safe_open(path, mmap=False) as f:
        assert not f.get_object("w").components["data"].zero_copy


def test_get_slice_reads_a_part(tmp):
    path = tmp / "s.zt"
    w = np.arange(60, dtype=np.int64).reshape(3, 4, 5)
    ztensor_rs.save_file({"w": w}, path)
    with ztensor_rs.safe_open(path) as f:
        part = f.get_slice("w")
        assert part.get_shape() == [3, 4, 5]
        assert part.get_dtype() == "i64"
        np.testing.assert_array_equal(part[1:, ::2, 3], w[1:, ::2, 3])
        assert part[0].flags.writeable


def test_attributes_of_every_kind_round_trip(tmp):
    meta = {
        "text": "x",
        "int": -(2**63),
        "big": 2**64 - 1,
        "float": 0.5,
        "bool": True,
        "none": None,
        "bytes": b"\x00\xff",
        "list": [1, "a", [2.0]],
        "nested": {"a": {"b": [None]}},
    }
    path = tmp / "m.zt"
    ztensor_rs.save_file({"w": np.zeros(2, np.uint8)}, path, metadata=meta)
    assert ztensor_rs.safe_open(path).metadata() == meta
    with pytest.raises(ValueError):
        ztensor_rs.save({"w": np.zeros(1)}, metadata={"bad": object()})
    with pytest.raises(ValueError):
        ztensor_rs.save({"w": np.zeros(1)}, metadata={"huge": 2**70})
    # Attributes are a map; a list is refused by name before anything is written.
    with pytest.raises(ValueError, match="must be a dict"):
        ztensor_rs.save({"w": np.zeros(1)}, metadata=[1, 2])
    # Keys that CBOR tells apart stay apart, and come back in a dict.
    assert ztensor_rs.safe_open(path).metadata()["nested"] == {"a": {"b": [None]}}


def test_safetensors_files_read_like_the_safetensors_package(tmp):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    data = {"a": sample("f4", (4, 3)), "b": sample("i8", (5,)), "c": sample("?", (2, 2)), "s": np.array(1.5, np.float16)}
    path = tmp / "m.safetensors"
    safetensors_numpy.save_file(data, str(path), metadata={"format": "np"})
    theirs = safetensors_numpy.load_file(str(path))
    with ztensor_rs.safe_open(path) as f:
        assert f.format == "safetensors"
        assert f.metadata() == {"format": "np"}
        assert f.keys() == sorted(theirs)
        for name in theirs:
            np.testing.assert_array_equal(f.get_tensor(name), theirs[name])
            assert f.get_tensor(name).shape == theirs[name].shape
        assert f.get_object("a").components["data"].zero_copy
    # And on to zTensor, and back out through the safetensors package.
    ours = ztensor_rs.load_file(path)
    zt = tmp / "m.zt"
    ztensor_rs.save_file(ours, zt, metadata=ztensor_rs.safe_open(path).metadata(), zstd=3)
    again = ztensor_rs.load_file(zt)
    out = tmp / "again.safetensors"
    safetensors_numpy.save_file({k: np.asarray(v, order="C") for k, v in again.items()}, str(out), metadata={"format": "np"})
    final = safetensors_numpy.load_file(str(out))
    for name in theirs:
        np.testing.assert_array_equal(final[name], theirs[name])
    assert out.read_bytes() == path.read_bytes()


def test_safetensors_package_reads_what_we_read_from_tensorbuffers(tmp):
    # A TensorBuffers fixture read by us, written with the safetensors package, read again.
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    data = ztensor_rs.load_file(FIXTURES / "tensorbuffers/valid/every-type.tb")
    assert data
    dense = {k: np.asarray(v, order="C") for k, v in data.items() if isinstance(v, np.ndarray)}
    out = tmp / "tb.safetensors"
    safetensors_numpy.save_file(dense, str(out))
    back = safetensors_numpy.load_file(str(out))
    for name, value in dense.items():
        np.testing.assert_array_equal(back[name], value)


def test_bfloat16_and_fp8_with_ml_dtypes(tmp):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = {
        "bf16": np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16),
        "e4m3": np.array([0.5, -1.0], dtype=ml_dtypes.float8_e4m3fn),
        "e5m2": np.array([2.0, 4.0], dtype=ml_dtypes.float8_e5m2),
    }
    path = tmp / "ml.zt"
    ztensor_rs.save_file(data, path)
    back = ztensor_rs.load_file(path)
    for name, value in data.items():
        assert back[name].dtype == value.dtype
        np.testing.assert_array_equal(back[name].astype(np.float32), value.astype(np.float32))
    with ztensor_rs.safe_open(path) as f:
        assert f.get_object("e4m3").components["data"].type == "f8_e4m3fn"
        assert f.get_object("bf16").components["data"].dtype == "bf16"


def test_without_ml_dtypes_bfloat16_and_fp8_come_back_raw(tmp, monkeypatch):
    path = FIXTURES / "v1.2/valid/logical-f8_e4m3fn.zt"
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now fails
    with ztensor_rs.safe_open(path) as f:
        name = f.keys()[0]
        array = f.get_tensor(name)
        assert array.dtype == np.uint8
        assert f.get_object(name).components["data"].type == "f8_e4m3fn"
    with ztensor_rs.safe_open(FIXTURES / "v1.2/valid/dense-bf16.zt") as f:
        assert f.get_tensor(f.keys()[0]).dtype == np.uint16


def test_sparse_objects_as_scipy_arrays():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with ztensor_rs.safe_open(FIXTURES / "v1.2/valid/sparse.zt") as f:
        csr = f.get_tensor("csr")
        assert isinstance(csr, scipy_sparse.csr_array)
        obj = f.get_object("csr")
        c = obj.components
        record = ztensor_rs.SparseCSR(obj.shape, c["values"].array, c["indices"].array, c["indptr"].array)
        np.testing.assert_array_equal(csr.toarray(), record.to_scipy().toarray())
        # CSR and COO of the fixture describe their matrices independently: check one entry
        # against the components by hand.
        dense = csr.toarray()
        for row in range(obj.shape[0]):
            for k in range(int(c["indptr"].array[row]), int(c["indptr"].array[row + 1])):
                assert dense[row, int(c["indices"].array[k])] == c["values"].array[k]
        coo = f.get_tensor("coo")
        co = f.get_object("coo").components
        dense = coo.toarray()
        for k in range(co["values"].array.size):
            assert dense[tuple(int(x) for x in co["coords"].array[:, k])] == co["values"].array[k]


def test_without_scipy_sparse_objects_are_records(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    with ztensor_rs.safe_open(FIXTURES / "v1.2/valid/sparse.zt") as f:
        csr = f.get_tensor("csr")
        assert isinstance(csr, ztensor_rs.SparseCSR)
        assert csr.shape == (3, 4) and csr.indptr.size == 4
        coo = f.get_tensor("coo")
        assert isinstance(coo, ztensor_rs.SparseCOO)
        assert coo.coords.shape == (2, coo.values.size)


def test_quantized_groups_are_objects_with_attributes():
    with ztensor_rs.safe_open(FIXTURES / "v1.2/valid/quantized-group.zt") as f:
        q = f.get_tensor(f.keys()[0])
        assert isinstance(q, ztensor_rs.Object)
        assert q.format == "quantized_group"
        assert {"packed_weight", "scales", "zeros"} <= q.components.keys()
        assert q.attributes is not None and "group_size" in q.attributes


def test_errors_say_what_and_where(tmp):
    with pytest.raises(FileNotFoundError):
        ztensor_rs.safe_open(tmp / "missing.zt")
    # A directory is an I/O failure, an OSError as the README says, not a format error.
    with pytest.raises(IsADirectoryError):
        ztensor_rs.safe_open(tmp)
    (tmp / "text.txt").write_text("hello")
    with pytest.raises(ztensor_rs.FormatError) as caught:
        ztensor_rs.safe_open(tmp / "text.txt")
    assert "which ztensor does not read" in str(caught.value)
    path = tmp / "e.zt"
    ztensor_rs.save_file({"w": np.zeros(3)}, path)
    with ztensor_rs.safe_open(path) as f:
        with pytest.raises(KeyError) as caught:
            f.get_tensor("x")
        assert isinstance(caught.value, ztensor_rs.ObjectNotFoundError)
        assert caught.value.object == "x"
        # A near miss is named, as the command-line tool names it.
        with pytest.raises(ztensor_rs.ObjectNotFoundError) as caught:
            f.get_tensor("ww")
        assert 'did you mean "w"?' in str(caught.value), str(caught.value)
    with pytest.raises(ValueError):
        ztensor_rs.save({"w": np.zeros(1)}, zstd=0)
    with pytest.raises(ValueError):
        ztensor_rs.save({"w": np.zeros(1)}, version="2.0")
    with pytest.raises(ValueError):
        ztensor_rs.save({"w": np.zeros(1)}, digest="md5")
    with pytest.raises(ztensor_rs.FormatError) as caught:
        ztensor_rs.save({"w": np.zeros(1, np.complex64)}, version="0.1")
    assert caught.value.rule is not None
    with pytest.raises(ztensor_rs.FormatError):
        ztensor_rs.save({"o": np.array(["text"], dtype=object)})
    with pytest.raises(ValueError):
        ztensor_rs.safe_open(path, framework="jax")
    # A failed write leaves the old file as it was.
    before = path.read_bytes()
    with pytest.raises(ztensor_rs.FormatError):
        ztensor_rs.save_file({"w": np.zeros(1, np.complex64)}, path, version="0.1")
    assert path.read_bytes() == before


def test_concurrent_readers_in_threads(tmp):
    path = tmp / "c.zt"
    data = {f"t{i}": sample("f4", (256, 64), i) for i in range(16)}
    ztensor_rs.save_file(data, path, zstd=1, digest="blake3")
    results: list[bool] = []

    def work() -> None:
        back = ztensor_rs.load_file(path, threads=2)
        results.append(all(np.array_equal(back[k], v) for k, v in data.items()))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_numpy_files_read_as_numpy_reads_them():
    # Files NumPy wrote, read by us and by NumPy itself.
    numpy_dir = FIXTURES / "external" / "numpy"
    checked = 0
    for path in sorted(numpy_dir.glob("*.npy")):
        try:
            theirs = np.load(path, allow_pickle=False)
        except ValueError:
            # Object arrays: NumPy refuses them without pickle, and so do we.
            with pytest.raises(ztensor_rs.ZTensorError):
                ztensor_rs.load_file(path)
            continue
        if theirs.dtype.kind not in "biufc":
            with pytest.raises(ztensor_rs.ZTensorError):
                ztensor_rs.load_file(path)
            continue
        ours = ztensor_rs.load_file(path)[path.stem]
        assert ours.shape == theirs.shape, path.name
        np.testing.assert_array_equal(ours, theirs)
        checked += 1
    assert checked >= 20
    for name in ("arrays.npz", "compressed.npz"):
        theirs = np.load(numpy_dir / name)
        ours = ztensor_rs.load_file(numpy_dir / name)
        assert ours.keys() == set(theirs.files)
        for key in theirs.files:
            np.testing.assert_array_equal(ours[key], theirs[key])


def test_gguf_files_read_as_llama_cpps_reader_reads_them():
    gguf = pytest.importorskip("gguf")
    for name in ("plain.gguf", "quantized.gguf"):
        path = FIXTURES / "external" / "gguf" / name
        reader = gguf.GGUFReader(str(path))
        with ztensor_rs.safe_open(path) as f:
            assert f.format == "GGUF version 3"
            assert f.metadata()["test.string"] == "zTensor ✓"
            for t in reader.tensors:
                obj = f.get_object(t.name)
                data = obj.components["data"]
                assert data.array.tobytes() == np.ascontiguousarray(t.data).tobytes(), t.name
                assert data.zero_copy, t.name
                if obj.attributes is not None:
                    assert obj.attributes["gguf.shape"] == [int(d) for d in reversed(t.shape)]
                else:
                    assert obj.shape == tuple(int(d) for d in reversed(t.shape))


def test_sharded_ztensor_checkpoints_read_as_one(tmp):
    import subprocess

    ztensor = REPO / "target" / "debug" / "ztensor"
    if not ztensor.exists():
        pytest.skip("the ztensor CLI is not built (cargo build -p ztensor-cli)")
    out = tmp / "sharded"
    src = FIXTURES / "examples" / "checkpoint" / "model.safetensors.index.json"
    subprocess.run([str(ztensor), "convert", "-q", str(src), f"{out}/"], check=True)
    ours = ztensor_rs.load_file(out / "model.zt.index.json")
    theirs = ztensor_rs.load_file(src)
    assert ours.keys() == theirs.keys() and len(ours) == 6
    for name, value in theirs.items():
        assert ours[name].tobytes() == value.tobytes()
    # An index that disagrees with its shards is refused.
    index = out / "model.zt.index.json"
    index.write_text(index.read_text().replace('"size": ', '"size": 1', 1))
    with pytest.raises(ztensor_rs.ZTensorError):
        ztensor_rs.load_file(index)


def _torch_expected():
    import json

    with open(FIXTURES / "external" / "pytorch" / "expected.json") as f:
        return json.load(f)


def _plain(v):
    """An attribute as make.py spells it (bytes as hex, dicts as pairs)."""
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, dict):
        return {"map": [[_plain(k), _plain(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _unordered(v):
    """``v`` with the pairs of every ``{"map": ...}`` sorted: attributes are maps, which keep no
    order of their own (held in deterministic CBOR), while make.py lists a dict's items in the
    order Python made them."""
    if isinstance(v, dict) and set(v) == {"map"}:
        return {"map": sorted((_unordered(p) for p in v["map"]), key=json.dumps)}
    if isinstance(v, dict):
        return {k: _unordered(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_unordered(x) for x in v]
    return v


def test_pytorch_checkpoints_read_as_torch_load_gives_them():
    """Checkpoints torch.save wrote (fixtures/external/pytorch, made by its make.py with torch):
    every tensor's bytes as torch.load gives them, the plain values as metadata."""
    import hashlib

    expected = _torch_expected()
    checked = 0
    for file, want in expected["files"].items():
        path = FIXTURES / "external" / "pytorch" / file
        if want["expect"] == "refused":
            with pytest.raises(ztensor_rs.FormatError) as e:
                ztensor_rs.load_file(path)
            assert want["words"] in str(e.value), file
            continue
        if want["expect"] == "unsupported":
            with pytest.raises(ztensor_rs.UnsupportedError):
                ztensor_rs.load_file(path)
            continue
        sparse = {k: t for k, t in want["tensors"].items() if "components" in t}
        with ztensor_rs.safe_open(path) as f:
            for name, t in sparse.items():
                obj = f.get_object(name)
                assert obj.format == t["format"] and list(obj.shape) == t["shape"], (file, name)
                for role, sha in t["components"].items():
                    data = obj.components[role].array.tobytes()
                    assert hashlib.sha256(data).hexdigest() == sha, (file, name, role)
                    checked += 1
            if sparse:
                ours = {k: _plain(v) for k, v in (f.metadata() or {}).items()}
                assert _unordered(ours) == _unordered(want["attributes"])
        if sparse:
            continue
        for loaded in (ztensor_rs.load_file(path), ztensor_rs.load(path.read_bytes())):
            # A checkpoint that is one tensor is named after the file (from bytes: "tensor").
            names = {("tensor" if k == path.stem and k not in loaded else k): k for k in want["tensors"]}
            assert set(loaded) == set(names), file
            for ours, theirs in names.items():
                t = want["tensors"][theirs]
                array = loaded[ours]
                assert list(array.shape) == t["shape"], (file, theirs)
                assert hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest() == t["sha256"]
                checked += 1
        with ztensor_rs.safe_open(path) as f:
            assert f.format.startswith("PyTorch checkpoint"), f.format
            ours = {k: _plain(v) for k, v in (f.metadata() or {}).items()}
            assert _unordered(ours) == _unordered(want["attributes"])
    assert checked >= 120


def test_pytorch_code_in_a_pickle_is_refused_by_name():
    path = FIXTURES / "external" / "pytorch" / "hostile" / "calls-os-system.pt"
    with pytest.raises(ztensor_rs.FormatError) as e:
        ztensor_rs.load_file(path)
    assert "system" in str(e.value) and "executes nothing" in str(e.value)
    with pytest.raises(ztensor_rs.FormatError):
        ztensor_rs.load(path.read_bytes())


@pytest.mark.parametrize("version", ["1.2", "2"])
def test_complex_arrays_save_to_every_version_with_a_complex_type(tmp_path, version):
    """A complex element is two storage elements: every writer counts its bytes so (zTensor 2
    from NumPy counted one, and refused the array)."""
    values = {"c64": (np.arange(6, dtype=np.float32) + 1j).astype(np.complex64).reshape(2, 3), "c128": np.array([1 - 2j, 3j])}
    path = tmp_path / "complex.zt"
    ztensor_rs.save_file(values, path, version=version)
    back = ztensor_rs.load_file(path)
    for name, want in values.items():
        assert back[name].dtype == want.dtype and back[name].shape == want.shape
        assert np.array_equal(back[name], want), name
