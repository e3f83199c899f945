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
