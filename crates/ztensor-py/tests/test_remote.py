"""Reading checkpoints in object storage from Python, against moto's S3 server (started here
on 127.0.0.1, stopped at the end). Without moto the tests are skipped, saying so, unless
ZTENSOR_REQUIRE_MOTO=1 (CI sets it): then they fail."""

from __future__ import annotations

import os

import numpy as np
import pytest

import ztensor_rs

try:
    import boto3
    from moto.server import ThreadedMotoServer
except ImportError as e:  # pragma: no cover - what CI must not see
    if os.environ.get("ZTENSOR_REQUIRE_MOTO") == "1":
        raise
    pytest.skip(f"moto[server] is not installed ({e})", allow_module_level=True)


@pytest.fixture(scope="module")
def s3():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="models")
    try:
        yield client
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def test_load_file_and_safe_open_read_an_s3_url(s3, tmp):
    tensors = {
        "w": np.arange(300_000, dtype=np.float32).reshape(600, 500),
        "b": np.array([1, -2, 3], dtype=np.int64),
    }
    import safetensors.numpy

    safetensors.numpy.save_file(tensors, str(tmp / "m.safetensors"))
    ztensor_rs.save_file(tensors, tmp / "m.zt")
    for name in ["m.safetensors", "m.zt"]:
        s3.upload_file(str(tmp / name), "models", name)
        loaded = ztensor_rs.load_file(f"s3://models/{name}")
        assert set(loaded) == {"w", "b"}
        for key, value in tensors.items():
            np.testing.assert_array_equal(loaded[key], value)
        with ztensor_rs.safe_open(f"s3://models/{name}", framework="numpy") as f:
            assert sorted(f.keys()) == ["b", "w"]
            np.testing.assert_array_equal(f.get_tensor("b"), tensors["b"])


def test_a_missing_object_is_file_not_found_naming_the_url(s3):
    with pytest.raises(FileNotFoundError, match="s3://models/absent.zt"):
        ztensor_rs.load_file("s3://models/absent.zt")


def test_save_file_and_convert_write_to_an_s3_url(s3, tmp):
    tensors = {
        "w": np.linspace(-1, 1, 200_000, dtype=np.float32).reshape(400, 500),
        "i": np.array([7, -8, 9], dtype=np.int32),
    }
    # save_file: a streamed upload, the object as save_file writes a local file.
    ztensor_rs.save_file(tensors, "s3://models/saved.zt", {"epoch": 3}, zstd=3)
    ztensor_rs.save_file(tensors, tmp / "saved.zt", {"epoch": 3}, zstd=3)
    body = s3.get_object(Bucket="models", Key="saved.zt")["Body"].read()
    assert body == (tmp / "saved.zt").read_bytes()
    # convert: from a URL, to a URL, and between the two, byte for byte the local conversion.
    ztensor_rs.convert(tmp / "saved.zt", tmp / "local-11.zt", to="1.1")
    ztensor_rs.convert("s3://models/saved.zt", "s3://models/converted.zt", to="1.1")
    ztensor_rs.convert(tmp / "saved.zt", "s3://models/up.zt", to="1.1")
    ztensor_rs.convert("s3://models/converted.zt", tmp / "down.zt", to="1.1")
    expected = (tmp / "local-11.zt").read_bytes()
    for key in ["converted.zt", "up.zt"]:
        assert s3.get_object(Bucket="models", Key=key)["Body"].read() == expected, key
    assert (tmp / "down.zt").read_bytes() == expected
    loaded = ztensor_rs.load_file("s3://models/converted.zt")
    for key, value in tensors.items():
        np.testing.assert_array_equal(loaded[key], value)
    # Every other target too: zTensor 2 (placed by seeking, staged on the way), safetensors
    # and TensorBuffers, each object the bytes of the local conversion.
    for to, key in [("2", "two.zt"), ("safetensors", "st.safetensors"), ("tb", "tb.tb")]:
        ztensor_rs.convert(tmp / "saved.zt", f"s3://models/{key}", to=to, drop_attributes=True)
        ztensor_rs.convert(tmp / "saved.zt", tmp / key, to=to, drop_attributes=True)
        body = s3.get_object(Bucket="models", Key=key)["Body"].read()
        assert body == (tmp / key).read_bytes(), to
        loaded = ztensor_rs.load_file(f"s3://models/{key}")
        for name, value in tensors.items():
            np.testing.assert_array_equal(loaded[name], value)


def test_writes_to_urls_that_cannot_hold_them_are_refused(s3, tmp):
    tensors = {"x": np.zeros(4, dtype=np.float32)}
    # A missing bucket: nothing published, the URL named.
    with pytest.raises(FileNotFoundError, match="s3://no-such-bucket/x.zt"):
        ztensor_rs.save_file(tensors, "s3://no-such-bucket/x.zt")
    # http(s):// is read only: EROFS, as a read-only file system says.
    with pytest.raises(OSError, match="http://127.0.0.1:9/x.zt") as refused:
        ztensor_rs.save_file(tensors, "http://127.0.0.1:9/x.zt")
    assert refused.value.errno == 30
    # Content the target cannot hold (file attributes, in TensorBuffers): refused, the upload
    # aborted, nothing published.
    ztensor_rs.save_file(tensors, tmp / "x.zt", {"epoch": 3})
    with pytest.raises(ztensor_rs.FormatError, match="no file attributes"):
        ztensor_rs.convert(tmp / "x.zt", "s3://models/x2.tb", to="tb")
    listed = s3.list_objects_v2(Bucket="models").get("Contents", [])
    assert not [o for o in listed if o["Key"] == "x2.tb"]
    uploads = s3.list_multipart_uploads(Bucket="models").get("Uploads", [])
    assert uploads == []


def test_a_sharded_checkpoint_in_a_bucket_reads_as_the_local_one(s3, tmp):
    """An index in a bucket, its shards the objects beside it: read by ranges, as files are."""
    from pathlib import Path

    checkpoint = Path(__file__).resolve().parents[3] / "fixtures" / "examples" / "checkpoint"
    for path in checkpoint.iterdir():
        s3.put_object(Bucket="models", Key=f"sharded/{path.name}", Body=path.read_bytes())
    url = "s3://models/sharded/model.safetensors.index.json"
    local = ztensor_rs.load_file(checkpoint / "model.safetensors.index.json")
    remote = ztensor_rs.load_file(url)
    assert sorted(remote) == sorted(local) and len(local) > 1
    for name, value in local.items():
        assert remote[name].tobytes() == value.tobytes(), name
    # A shard gone: FileNotFoundError naming it.
    s3.delete_object(Bucket="models", Key="sharded/model-00002-of-00002.safetensors")
    with pytest.raises(FileNotFoundError, match="model-00002-of-00002.safetensors"):
        ztensor_rs.load_file(url)
