"""The command-line tool and the Python package tell files apart through one format registry:
on a mixed corpus (every kind of input, misleading extensions, truncated files, zips of each
kind, formats not read) they give the same verdict for every file."""

import io
import json
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ztensor_rs

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"


def cli() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / "debug" / "ztensor"
    assert binary.exists(), f"{binary} is built by `cargo test --workspace` before these tests"
    return binary


def corpus(tmp: Path) -> list:
    """The files: (path, what it is meant to be)."""
    originals = {
        "zt-0.1": FIXTURES / "examples/tiny-v0.1.zt",
        "zt-1.1": FIXTURES / "examples/tiny-v1.1.zt",
        "zt-1.2": FIXTURES / "examples/tiny-v1.2.zt",
        "sharded-safetensors": FIXTURES / "examples/checkpoint/model.safetensors.index.json",
        "safetensors": FIXTURES / "examples/checkpoint/model-00001-of-00002.safetensors",
        "tb": FIXTURES / "tensorbuffers/valid/sample.tb",
        "npy": FIXTURES / "external/numpy/dense-f4.npy",
        "npz": FIXTURES / "external/numpy/arrays.npz",
        "npz-deflated": FIXTURES / "external/numpy/compressed.npz",
        "gguf": FIXTURES / "external/gguf/plain.gguf",
        "gguf-quantized": FIXTURES / "external/gguf/quantized.gguf",
        "torch-zip": FIXTURES / "external/pytorch/checkpoint.pt",
        "torch-legacy": FIXTURES / "external/pytorch/legacy.pt",
    }
    files = [(path, name) for name, path in originals.items()]
    # A few files of each zTensor version that break a rule.
    for version in ("v0.1", "v1.1", "v1.2"):
        rejects = sorted((FIXTURES / version / "reject").glob("*.zt"))[:6]
        assert rejects, version
        files += [(p, f"reject {version}") for p in rejects]
    files += [(p, "reject tb") for p in sorted((FIXTURES / "tensorbuffers/reject").glob("*.tb"))[:6]]
    # Every single-file kind under misleading names, and truncated.
    for name, path in originals.items():
        if name == "sharded-safetensors":
            continue
        data = path.read_bytes()
        for ext in (".zt", ".safetensors", ".tb", ".npz", ".pt", ".gguf", ".bin"):
            wrong = tmp / f"{name}-as{ext}"
            wrong.write_bytes(data)
            files.append((wrong, f"{name} named {ext}"))
        for cut, label in ((len(data) // 2, "half"), (10, "10 bytes"), (0, "empty")):
            short = tmp / f"{name}-{label.replace(' ', '')}{path.suffix}"
            short.write_bytes(data[:cut])
            files.append((short, f"{name} cut to {label}"))
    # Zips of each kind: of .npy members (an .npz), of a torch.save layout, of neither.
    npy = (FIXTURES / "external/numpy/dense-f4.npy").read_bytes()
    for name, members in (
        ("of-npy", {"a.npy": npy}),
        ("of-text", {"readme.txt": b"hello"}),
        ("torch-layout-no-pickle", {"archive/version": b"3\n"}),
    ):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as z:
            for member, data in members.items():
                z.writestr(member, data)
        for ext in (".zip", ".npz", ".pt"):
            path = tmp / f"zip-{name}{ext}"
            path.write_bytes(buffer.getvalue())
            files.append((path, f"zip {name} named {ext}"))
    # zTensor 2: a file of the reference project's corpus, one it rejects, and one cut short
    # after its magic, under misleading names.
    v2 = Path(__file__).resolve().parents[2] / "ztensor-conformance/fixtures/external/ztensor2"
    for name, data in (
        ("zt2-valid", (v2 / "valid/canonical-basic.zt").read_bytes()),
        ("zt2-reject", (v2 / "reject/manifest-hash-mismatch.zt").read_bytes()),
        ("zt2-cut", b"\x89ZT2\r\n\x1a\n" + bytes(64)),
    ):
        for ext in (".zt", ".bin", ".safetensors"):
            path = tmp / f"{name}{ext}"
            path.write_bytes(data)
            files.append((path, f"{name} named {ext}"))
    # Formats not read, named by their first bytes.
    for name, data in (
        ("hdf5", b"\x89HDF\r\n\x1a\n" + bytes(64)),
        ("zstd", b"\x28\xb5\x2f\xfd" + bytes(64)),
        ("gzip", b"\x1f\x8b" + bytes(64)),
        ("pickle", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."),
        ("json", b'{"weight_map": {}}'),
        ("text", b"just some text\n"),
    ):
        for ext in (".zt", ".bin"):
            path = tmp / f"{name}{ext}"
            path.write_bytes(data)
            files.append((path, f"{name} named {ext}"))
    # A directory, and a file that is not there.
    directory = tmp / "a-directory"
    directory.mkdir()
    shutil.copy(originals["safetensors"], directory / "model.safetensors")
    files.append((directory, "a directory"))
    files.append((tmp / "missing.zt", "missing"))
    # A Distributed Checkpoint torch saved: its directory, its .metadata, and one whose data
    # file was cut short.
    dcp = FIXTURES / "external/dcp/native"
    files += [(dcp, "dcp directory"), (dcp / ".metadata", "dcp .metadata")]
    cut = tmp / "dcp-cut"
    shutil.copytree(dcp, cut)
    data = cut / "__1_0.distcp"
    data.write_bytes(data.read_bytes()[:-100])
    files.append((cut, "dcp with a data file cut short"))
    return files


def cli_verdict(path: Path) -> tuple:
    """`ztensor info --json`: ("read", format), ("rejected",) or ("refused",)."""
    out = subprocess.run([str(cli()), "info", "--json", str(path)], capture_output=True, timeout=60)
    if out.returncode == 0:
        return ("read", json.loads(out.stdout)["format"])
    assert out.returncode in (1, 2), (path, out.returncode, out.stderr)
    return ("rejected",) if out.returncode == 1 else ("refused",)


def python_verdict(path: Path) -> tuple:
    """`safe_open` and `detect`, in the same terms."""
    try:
        kind = ztensor_rs.detect(path)
    except ztensor_rs.FormatError as e:
        assert "does not read" in str(e), (path, str(e))
        return ("refused",)
    except (OSError, ztensor_rs.ZTensorError):
        return ("refused",)
    try:
        with ztensor_rs.safe_open(path, framework="numpy") as f:
            f.keys()
    except (ztensor_rs.FormatError, ztensor_rs.UnsupportedError):
        return ("rejected",)
    except OSError:
        return ("refused",)
    return ("read", kind)


def test_cli_and_python_give_the_same_verdict_on_a_mixed_corpus(tmp_path):
    files = corpus(tmp_path)
    assert len(files) > 150
    verdicts = {}
    for path, what in files:
        ours, theirs = cli_verdict(path), python_verdict(path)
        assert ours == theirs, f"{what} ({path.name}): CLI {ours}, Python {theirs}"
        verdicts.setdefault(ours[0], 0)
        verdicts[ours[0]] += 1
    # The corpus exercises every verdict.
    assert set(verdicts) == {"read", "rejected", "refused"}, verdicts
    # Content decides, whatever the name: each readable kind under a misleading extension is
    # read as what it is.
    for path, what in files:
        if " named ." in what and what.split(" named ")[0] in ("zt-1.2", "safetensors", "gguf", "npz", "torch-zip", "tb", "zt2-valid"):
            assert cli_verdict(path)[0] == "read", what


def test_ztensor_2_files_read_as_numpy():
    v2 = Path(__file__).resolve().parents[2] / "ztensor-conformance/fixtures/external/ztensor2"
    assert ztensor_rs.detect(v2 / "valid/canonical-basic.zt") == "ztensor2"
    with ztensor_rs.safe_open(v2 / "valid/canonical-basic.zt", framework="numpy") as f:
        assert sorted(f.keys()) == ["a.bias", "a.weight", "tied"]
        bias = f.get_tensor("a.bias")
        assert bias.dtype.name == "float32" and bias.shape == (4,)
        assert bias.tobytes() == bytes([1]) * 16
    # A file whose manifest hash is wrong is a format error naming the rule.
    try:
        ztensor_rs.safe_open(v2 / "reject/manifest-hash-mismatch.zt", framework="numpy")
    except ztensor_rs.FormatError as e:
        assert "manifest_hash" in str(e)
    else:
        raise AssertionError("a damaged zTensor 2 file opened")


def test_ztensor_2_bytes_load_as_the_file():
    v2 = FIXTURES / "external" / "ztensor2"
    for name in ("canonical-basic.zt", "csr-data-valid.zt", "aliased-identical-blobs.zt"):
        path = v2 / "valid" / name
        whole = ztensor_rs.load_file(path)
        from_bytes = ztensor_rs.load(path.read_bytes())
        assert whole and whole.keys() == from_bytes.keys(), name
        for key, value in whole.items():
            other = from_bytes[key]
            if isinstance(value, np.ndarray):
                assert value.dtype == other.dtype and value.shape == other.shape, key
                assert value.tobytes() == other.tobytes(), key
        with ztensor_rs.open_bytes(path.read_bytes()) as f:
            assert f.format == "zTensor 2"
    # A root whose parts lie in shard files: bytes have no directory to find them in. An
    # ordinary exception (a panic would escape `except Exception`).
    sharded = (v2 / "hostile" / "shards-1000-missing.zt").read_bytes()
    with pytest.raises(ztensor_rs.ZTensorError, match="open it by its path"):
        ztensor_rs.load(sharded)


def _npy(header: str, data: bytes) -> bytes:
    h = header.encode()
    while (10 + len(h) + 1) % 64:
        h += b" "
    h += b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data


def test_a_leading_magic_decides_before_a_trailing_one(tmp_path):
    # Valid files of one format whose last bytes are another's magic.
    npy = _npy("{'descr': '|u1', 'fortran_order': False, 'shape': (16,), }", b"12345678ZTEN1000")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.npy", npy)
        z.comment = b"ZTEN1000"
    npz = buf.getvalue()
    header = json.dumps({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}).encode()
    st = struct.pack("<Q", len(header)) + header + b"TBS1"
    for data, kind, name, key, value in (
        (npy, "npy", "a.npy", "a", b"12345678ZTEN1000"),
        (npz, "npz", "a.npz", "a", b"12345678ZTEN1000"),
        (st, "safetensors", "a.safetensors", "w", b"TBS1"),
    ):
        assert data.endswith((b"ZTEN1000", b"TBS1"))
        path = tmp_path / name
        path.write_bytes(data)
        assert ztensor_rs.detect(path) == kind
        assert ztensor_rs.load_file(path)[key].tobytes() == value
        assert ztensor_rs.load(data)[key if kind != "npy" else "array"].tobytes() == value


def test_a_directory_reads_as_the_checkpoint_in_it_or_is_an_os_error(tmp_path):
    # A directory holding one checkpoint's index reads as that index (a sharded safetensors
    # checkpoint, the zTensor checkpoint a ZTensorWriter leaves).
    for directory, index in [
        (FIXTURES / "examples/checkpoint", "model.safetensors.index.json"),
        (FIXTURES / "external/dcp/ztensor", "model.zt.index.json"),
    ]:
        whole = ztensor_rs.load_file(directory)
        assert whole.keys() == ztensor_rs.load_file(directory / index).keys()
        for key, value in whole.items():
            assert value.tobytes() == ztensor_rs.load_file(directory / index)[key].tobytes()
        assert ztensor_rs.detect(directory) == ztensor_rs.detect(directory / index)
    # As the README promises for a path that cannot be read: an OSError (IsADirectoryError),
    # for a directory holding no checkpoint, and for one holding two, each named.
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(IsADirectoryError):
        ztensor_rs.load_file(empty)
    two = tmp_path / "two"
    two.mkdir()
    for name in ["model.zt.index.json", "other.safetensors.index.json"]:
        (two / name).write_text("{}")
    with pytest.raises(IsADirectoryError, match="holds 2 checkpoints") as raised:
        ztensor_rs.load_file(two)
    assert "model.zt.index.json" in str(raised.value) and "other.safetensors.index.json" in str(raised.value)


@pytest.mark.parametrize(
    "to, kind, zstd",
    [
        ("safetensors", "safetensors", None),
        ("tb", "tensorbuffers", None),
        ("1.1", "ztensor", None),
        ("2", "ztensor2", None),
        ("1.2", "ztensor", 3),
        ("2", "ztensor2", 3),
    ],
)
def test_convert_is_the_command_line_conversion(tmp_path, to, kind, zstd):
    """`convert` and `ztensor convert --to` run one conversion: every target the tool writes,
    the same bytes."""
    # Dense tensors of types every target holds, zstd-compressed (so zTensor targets encode).
    src = tmp_path / "src.zt"
    tensors = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.array([1, -2, 3], dtype=np.int64),
        "c": np.zeros(4096, dtype=np.uint8),
        # Bytes zstd cannot make smaller: stored raw by both, unless told otherwise.
        "d": np.random.default_rng(7).integers(0, 256, 8192, dtype=np.uint8),
    }
    ztensor_rs.save_file(tensors, src, metadata={"note": "text"}, zstd=3)
    if zstd:
        # Content that arrives decoded (safetensors), so that it is encoded afresh.
        ztensor_rs.convert(src, tmp_path / "src.safetensors", to="safetensors")
        src = tmp_path / "src.safetensors"
    original = ztensor_rs.load_file(src)
    ours, theirs = tmp_path / "ours.out", tmp_path / "theirs.out"
    # (A file attribute TensorBuffers has no place for.)
    n = ztensor_rs.convert(src, ours, to=to, zstd=zstd, threads=2, drop_attributes=True)
    assert n == len(original) > 0
    level = ["--zstd", str(zstd)] if zstd else []
    out = subprocess.run(
        [str(cli()), "convert", "-q", "--drop-attributes", "--to", to, "--threads", "2"]
        + level
        + [str(src), str(theirs)],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert ztensor_rs.detect(ours) == kind
    assert ours.read_bytes() == theirs.read_bytes()
    copied = ztensor_rs.load_file(ours)
    assert sorted(original) == sorted(copied)
    for name in original:
        assert original[name].tobytes() == copied[name].tobytes(), name


def test_convert_names_the_targets_it_knows(tmp_path):
    src = FIXTURES / "examples/tiny-v1.2.zt"
    with pytest.raises(ValueError, match="safetensors or tensorbuffers"):
        ztensor_rs.convert(src, tmp_path / "x", to="hdf5")
    with pytest.raises(ValueError, match="zstd does not apply to safetensors"):
        ztensor_rs.convert(src, tmp_path / "x", to="safetensors", zstd=3)
    assert not (tmp_path / "x").exists()


def _both_refuse(src: Path, dst: Path, cli_args: list, kwargs: dict) -> tuple:
    """The command-line tool's refusal (status 2, its message) and Python's (ValueError) of
    the same conversion request; neither leaves anything at ``dst`` it did not find there."""
    existed = dst.exists()
    before = dst.read_bytes() if existed and dst.is_file() else None
    out = subprocess.run(
        [str(cli()), "convert", "-q", str(src), str(dst)] + cli_args, capture_output=True, timeout=60
    )
    assert out.returncode == 2, (cli_args, out.stderr)
    told = out.stderr.decode().strip()
    assert told.startswith("ztensor: "), told
    with pytest.raises(ValueError) as raised:
        ztensor_rs.convert(src, dst, **kwargs)
    if before is not None:
        assert dst.read_bytes() == before
    elif not existed:
        assert not dst.exists()
    return told[len("ztensor: "):], str(raised.value)


def test_python_and_the_tool_refuse_the_same_conversions(tmp_path):
    """One set of rules (the registry's) for a conversion request, whichever front end asks:
    the same refusal, word for word, each naming the option as its user wrote it."""
    src = tmp_path / "m.safetensors"
    ztensor_rs.save_file({"w": np.arange(6, dtype=np.float32)}, src)
    assert ztensor_rs.detect(src) == "safetensors"
    zt = tmp_path / "m.zt"
    ztensor_rs.convert(src, zt)
    assert ztensor_rs.detect(zt) == "ztensor"
    unnamed = tmp_path / "m.data"
    shutil.copy(zt, unnamed)
    linked = tmp_path / "linked.zt"
    os.link(zt, linked)
    # (input, output, CLI arguments, Python arguments, what both say); messages that name no
    # option are the same word for word.
    same = [
        (src, tmp_path / "c", [], {}, "has no extension"),
        (src, tmp_path / "c.safetensor", [], {}, "did you mean .safetensors?"),
        (src, tmp_path / "c.pt", [], {}, "reads but does not write"),
        (src, src, [], {}, "is also the input"),
        (unnamed, unnamed, ["--to", "safetensors"], {"to": "safetensors"}, "is also the input"),
        (zt, zt, ["--to", "2"], {"to": "2"}, "is also the input"),
        (zt, linked, ["--to", "2"], {"to": "2"}, "is also the input"),
    ]
    for source, dst, cli_args, kwargs, says in same:
        told, raised = _both_refuse(source, dst, cli_args, kwargs)
        assert says in told, (dst, told)
        assert told.replace("--to", "to=") == raised or told == raised, (told, raised)
    # Messages that name an option: the same sentence, in each front end's spelling.
    spelt = [
        (src, tmp_path / "c.safetensors", ["--zstd", "3"], {"zstd": 3},
         "--zstd does not apply to safetensors", "zstd does not apply to safetensors"),
        (src, tmp_path / "c.tb", ["--zstd", "3"], {"zstd": 3},
         "--zstd does not apply to TensorBuffers", "zstd does not apply to TensorBuffers"),
        (zt, tmp_path / "c.safetensors", ["--to", "2"], {"to": "2"},
         "is named as a safetensors file, but --to 2 asks for zTensor 2",
         'is named as a safetensors file, but to="2" asks for zTensor 2'),
        (src, tmp_path / "c.zt", ["--to", "safetensors"], {"to": "safetensors"},
         "but --to safetensors asks for safetensors", 'but to="safetensors" asks for safetensors'),
    ]
    for source, dst, cli_args, kwargs, cli_says, python_says in spelt:
        told, raised = _both_refuse(source, dst, cli_args, kwargs)
        assert cli_says in told, told
        assert python_says in raised, raised
        for option in ("--to 2", "--to safetensors", "--zstd"):
            told = told.replace(option, "OPTION")
        for option in ('to="2"', 'to="safetensors"', "zstd"):
            raised = raised.replace(option, "OPTION")
        assert told == raised, (told, raised)
    # What both write without `to`: what the name says; the same bytes.
    for name in ["o.safetensors", "o.zt", "o.tb"]:
        theirs, ours = tmp_path / ("cli-" + name), tmp_path / ("py-" + name)
        out = subprocess.run([str(cli()), "convert", "-q", str(src), str(theirs)], capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert ztensor_rs.convert(src, ours) == 1
        assert ours.read_bytes() == theirs.read_bytes(), name
    assert ztensor_rs.detect(tmp_path / "py-o.safetensors") == "safetensors"
    # zTensor rewritten as zTensor in place: allowed by both.
    assert ztensor_rs.convert(zt, zt, to="1.1") == 1
    with ztensor_rs.safe_open(zt) as f:
        assert f.format == "zTensor 1.1"


def test_save_file_writes_what_the_name_says(tmp_path):
    """``save_file("x.safetensors")`` writes safetensors (read by safetensors itself), ``.tb``
    TensorBuffers, ``.zt`` and names of no format zTensor 1.2; a name of a format read but not
    written, or a version the name contradicts, is refused before anything is written."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(3, dtype=np.int64)}
    st = tmp_path / "x.safetensors"
    ztensor_rs.save_file(tensors, st, metadata={"note": "text"})
    theirs = safetensors_numpy.load_file(str(st))
    assert sorted(theirs) == ["a", "b"]
    for name in tensors:
        assert theirs[name].dtype == tensors[name].dtype
        assert np.array_equal(theirs[name], tensors[name])
    # The same file safetensors writes from the same tensors and metadata.
    reference = tmp_path / "ref.safetensors"
    safetensors_numpy.save_file(tensors, str(reference), metadata={"note": "text"})
    assert ztensor_rs.load_file(reference).keys() == ztensor_rs.load_file(st).keys()
    with ztensor_rs.safe_open(st) as f:
        assert f.metadata() == {"note": "text"}
    tb = tmp_path / "x.tb"
    ztensor_rs.save_file(tensors, tb)
    assert ztensor_rs.detect(tb) == "tensorbuffers"
    for name in ["x.zt", "weights"]:
        ztensor_rs.save_file(tensors, tmp_path / name)
        assert ztensor_rs.detect(tmp_path / name) == "ztensor"
    ztensor_rs.save_file(tensors, tmp_path / "two.zt", version="2")
    assert ztensor_rs.detect(tmp_path / "two.zt") == "ztensor2"
    for name, kwargs, says in [
        ("x.pt", {}, "reads but does not write"),
        ("y.safetensors", {"version": "2"}, 'but version="2" asks for zTensor 2'),
        ("y.safetensors", {"zstd": 3}, "zstd does not apply to safetensors"),
        ("y.safetensors", {"digest": "sha256"}, "digest does not apply to safetensors"),
        ("y.zt", {"version": "2", "digest": "sha256"}, "digest does not apply to zTensor 2"),
    ]:
        with pytest.raises(ValueError, match=says.replace("(", r"\(")):
            ztensor_rs.save_file(tensors, tmp_path / name, **kwargs)
        assert not (tmp_path / name).exists()
    # safetensors holds text metadata only: anything else is refused, and nothing written.
    with pytest.raises(ztensor_rs.ZTensorError):
        ztensor_rs.save_file(tensors, tmp_path / "z.safetensors", metadata={"n": 1})
    assert not (tmp_path / "z.safetensors").exists()
    # To bytes: zTensor 1.2, or the format asked for.
    as_bytes = ztensor_rs.open_bytes(ztensor_rs.save(tensors, version="safetensors"))
    assert (as_bytes.format, as_bytes.keys()) == ("safetensors", ["a", "b"])
