"""zTensor 2 from Python: converting 0.1/1.x files to it and back, and content identity."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import ztensor_rs

from conftest import FIXTURES

CORPUS = FIXTURES / "external" / "ztensor2"


def _same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert x.tobytes() == y.tobytes(), name
        else:
            assert type(x) is type(y), name


@pytest.mark.parametrize(
    "fixture", ["examples/tiny-v0.1.zt", "examples/tiny-v1.1.zt", "examples/tiny-v1.2.zt"]
)
def test_to_2_and_back(tmp: pathlib.Path, fixture: str) -> None:
    src = FIXTURES / fixture
    two, back = tmp / "two.zt", tmp / "back.zt"
    assert ztensor_rs.convert(src, two, to="2") == 4
    assert ztensor_rs.detect(two) == "ztensor2"
    assert ztensor_rs.convert(two, back, to="1.2") == 4
    assert ztensor_rs.detect(back) == "ztensor"
    original = ztensor_rs.load_file(src)
    _same(original, ztensor_rs.load_file(two))
    _same(original, ztensor_rs.load_file(back))
    identity = ztensor_rs.content_id(src)
    assert identity.startswith("sha256:") and len(identity) == 71
    assert ztensor_rs.content_id(two) == identity == ztensor_rs.content_id(back)
    # Canonical: the way back converted again gives the same bytes.
    again = tmp / "again.zt"
    ztensor_rs.convert(back, again, to="2")
    assert again.read_bytes() == two.read_bytes()
    # With zstd: every part encoded, the same content and identity.
    packed = tmp / "packed.zt"
    ztensor_rs.convert(src, packed, to="2", zstd=3)
    _same(original, ztensor_rs.load_file(packed))
    assert ztensor_rs.content_id(packed) == identity


def test_the_reference_identity_and_refusals(tmp: pathlib.Path) -> None:
    # The value the reference implementation's documentation gives for its canonical example.
    assert (
        ztensor_rs.content_id(CORPUS / "valid" / "canonical-basic.zt")
        == "sha256:4811d499a49d509f70874bb87b0f71f9d8895873acca2d29581e17bff2be8a9c"
    )
    assert ztensor_rs.content_id(CORPUS / "valid" / "canonical-basic.zt", "xxh3") == (
        "xxh3:faa8ab77fff0086c"
    )
    with pytest.raises(ValueError):
        ztensor_rs.content_id(CORPUS / "valid" / "canonical-basic.zt", "md5")
    # Parts without digests: no identity.
    with pytest.raises(ztensor_rs.ZTensorError):
        ztensor_rs.content_id(CORPUS / "valid" / "minimal.zt")
    # A broken file is a FormatError with its rule.
    with pytest.raises(ztensor_rs.FormatError) as e:
        ztensor_rs.content_id(CORPUS / "reject" / "manifest-hash-mismatch.zt")
    assert e.value.rule == "manifest_hash"
    # Attributes zTensor 2 cannot hold (a tagged value) are refused, or dropped when asked;
    # nothing is left at the output when refused.
    tagged = FIXTURES / "v1.2" / "valid" / "attributes-every-kind.zt"
    out = tmp / "t.zt"
    with pytest.raises(ztensor_rs.ZTensorError):
        ztensor_rs.convert(tagged, out, to="2")
    assert not out.exists()
    ztensor_rs.convert(tagged, out, to="2", drop_attributes=True)
    assert ztensor_rs.detect(out) == "ztensor2"
    # zTensor 2 over itself: not a zTensor 1.x rewritten in place.
    with pytest.raises(ValueError, match="is also the input"):
        ztensor_rs.convert(out, out, to="2")
    with pytest.raises(ValueError):
        ztensor_rs.convert(tagged, tmp / "u.zt", to="3")
    # A missing input is missing, whatever the output (neither path exists: not "the same").
    with pytest.raises(FileNotFoundError):
        ztensor_rs.convert(tmp / "nothing.zt", tmp / "nowhere.zt")


def _workers() -> list[str]:
    """The names of this process's threads that are the engine's workers (``zt-work-N``)."""
    names = []
    for task in pathlib.Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith("zt-work-"):
            names.append(name)
    return names


@pytest.mark.skipif(
    not pathlib.Path("/proc/self/task").is_dir(), reason="threads are read from /proc"
)
def test_convert_to_2_runs_on_the_threads_asked_for(tmp: pathlib.Path) -> None:
    import time
    from concurrent.futures import ThreadPoolExecutor

    # 64 MiB in parts the writer compresses ahead and streams, on a thread of its own while
    # this one reads the process's threads (the conversion runs without the GIL).
    src = tmp / "big.zt"
    ramp = np.arange(1 << 22, dtype=np.uint32) // 7
    ztensor_rs.save_file({f"t{i}": ramp + i for i in range(4)}, src)
    outputs = []
    for threads in (1, 3):
        # The pools of earlier calls end soon after them, though not with them.
        deadline = time.monotonic() + 10
        while _workers() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _workers() == []
        out = tmp / f"two-{threads}.zt"
        peak, seen = 0, set()
        with ThreadPoolExecutor(1) as background:
            converting = background.submit(ztensor_rs.convert, src, out, zstd=3, threads=threads)
            while not converting.done():
                now = _workers()
                peak = max(peak, len(now))
                seen.update(now)
            assert converting.result() == 4
        assert peak == threads
        assert seen == {f"zt-work-{i}" for i in range(threads)}
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_gguf_mxfp4_converts_to_zt_mx_as_the_command_line_converts_it(tmp: pathlib.Path) -> None:
    gguf = FIXTURES / "external" / "gguf" / "mxfp4.gguf"
    two, twelve = tmp / "two.zt", tmp / "twelve.zt"
    assert ztensor_rs.convert(gguf, two, to="2") == 8
    # The content identity of a GGUF file is that of its zTensor 2 conversion, whose MXFP4
    # tensors are zt.mx/1 objects (their codes repacked, their scales apart): the same here.
    assert ztensor_rs.content_id(two) == ztensor_rs.content_id(gguf)
    # Dense tensors read as they were; the blocks have no NumPy type.
    with ztensor_rs.safe_open(two, framework="numpy") as f:
        assert f.get_tensor("plain").shape == (3, 5)
        assert f.get_tensor("row.dequantized").dtype.name == "float32"
    # zTensor 1.2 keeps each tensor's blocks as bytes, its GGML type beside them.
    ztensor_rs.convert(gguf, twelve, to="1.2")
    with ztensor_rs.safe_open(twelve, framework="numpy") as f:
        row = f.get_tensor("row")
        assert row.dtype.name == "uint8" and row.shape == (17,)
    # zTensor 1.2 carries the zt.mx/1 objects structurally; back in zTensor 2, the same file.
    back, again = tmp / "back.zt", tmp / "again.zt"
    ztensor_rs.convert(two, back, to="1.2")
    ztensor_rs.convert(back, again, to="2")
    assert again.read_bytes() == two.read_bytes()
