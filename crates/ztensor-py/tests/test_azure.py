"""Checkpoints in Azure Blob Storage (`az://`), against Azurite, Microsoft's own emulator
(started here on 127.0.0.1 and a free port, stopped at the end): the store whose client takes
no suffix ranges, so an object opens in two requests there. `cargo xtask test` installs it
(npm) and names it in ZTENSOR_AZURITE; without it the tests are skipped, saying so, unless
ZTENSOR_REQUIRE_AZURITE=1 (CI sets it): then they fail."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import numpy as np
import pytest

import ztensor_rs

AZURITE = os.environ.get("ZTENSOR_AZURITE")
if not AZURITE or not os.path.exists(AZURITE):  # pragma: no cover - what CI must not see
    if os.environ.get("ZTENSOR_REQUIRE_AZURITE") == "1":
        raise RuntimeError(f"ZTENSOR_REQUIRE_AZURITE=1 and no Azurite at {AZURITE!r}")
    pytest.skip("no Azurite (ZTENSOR_AZURITE); `cargo xtask test` installs it", allow_module_level=True)

try:
    from azure.storage.blob import BlobServiceClient
except ImportError as e:  # pragma: no cover - what CI must not see
    if os.environ.get("ZTENSOR_REQUIRE_AZURITE") == "1":
        raise
    pytest.skip(f"azure-storage-blob is not installed ({e})", allow_module_level=True)

# Azurite's well-known development account (public, in Microsoft's documentation).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module")
def azure(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Its debug log and workspace files go nowhere: the blobs are held in memory.
    server = subprocess.Popen(
        [AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence"]
        + ["--skipApiVersionCheck", "--silent"],
        cwd=tmp_path_factory.mktemp("azurite"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "Azurite exited at once"
                assert time.monotonic() < deadline, "Azurite did not listen within 60 s"
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        env = {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": f"http://127.0.0.1:{port}"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        service = BlobServiceClient.from_connection_string(
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};BlobEndpoint={endpoint};"
        )
        container = service.create_container("models")
        try:
            yield container
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        server.kill()
        server.wait()


def test_every_target_round_trips_through_azure(azure, tmp):
    tensors = {
        "w": np.linspace(-1, 1, 300_000, dtype=np.float32).reshape(600, 500),
        "i": np.array([7, -8, 9], dtype=np.int32),
    }
    # save_file: a streamed upload, the bytes of the local file.
    ztensor_rs.save_file(tensors, "az://models/saved.zt", {"epoch": 3}, zstd=3)
    ztensor_rs.save_file(tensors, tmp / "saved.zt", {"epoch": 3}, zstd=3)
    body = azure.download_blob("saved.zt").readall()
    assert body == (tmp / "saved.zt").read_bytes()
    # Read back by ranges (a HEAD, then the last bytes: Azure's client has no suffix ranges).
    loaded = ztensor_rs.load_file("az://models/saved.zt")
    for name, value in tensors.items():
        np.testing.assert_array_equal(loaded[name], value)
    with ztensor_rs.safe_open("az://models/saved.zt", framework="numpy") as f:
        assert sorted(f.keys()) == ["i", "w"]
        np.testing.assert_array_equal(f.get_slice("w")[10:12], tensors["w"][10:12])
    # convert, from and to Azure, every target the bytes of the local conversion.
    for to, key in [("2", "two.zt"), ("1.1", "v11.zt"), ("safetensors", "st.safetensors")]:
        ztensor_rs.convert("az://models/saved.zt", f"az://models/{key}", to=to, drop_attributes=True)
        ztensor_rs.convert(tmp / "saved.zt", tmp / key, to=to, drop_attributes=True)
        assert azure.download_blob(key).readall() == (tmp / key).read_bytes(), to
    # A missing object: FileNotFoundError naming the URL.
    with pytest.raises(FileNotFoundError, match="az://models/absent.zt"):
        ztensor_rs.load_file("az://models/absent.zt")
