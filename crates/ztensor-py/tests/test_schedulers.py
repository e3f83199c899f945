"""The scheduler recipes, run for real: `python -m ztensor_rs.ray` on a private local Ray
cluster (a head and two worker nodes on this machine, one killed while it runs a unit), its
checkpoint in a bucket of moto's S3 server; and the Kubernetes manifests checked against the
Kubernetes schema. Without Ray or moto the Ray test is skipped, saying so, unless
ZTENSOR_REQUIRE_MOTO=1 (CI sets it): then it fails."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ztensor_rs

REPO = Path(__file__).resolve().parents[3]
REQUIRED = os.environ.get("ZTENSOR_REQUIRE_MOTO") == "1"


def cli() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = target / "debug" / "ztensor"
    assert binary.exists(), f"{binary} is built by `cargo test --workspace` before these tests"
    return binary


def ztensor(*args: str, env: dict) -> str:
    done = subprocess.run([str(cli()), *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto(tmp):
    """moto's S3 server as a process of its own (so it can be paused), on a free loopback
    port; the environment the AWS tools (and ztensor) take it from."""
    server = Path(sys.executable).parent / "moto_server"
    if not server.exists():
        if REQUIRED:
            raise AssertionError(f"{server} is installed with the test requirements")
        pytest.skip("moto_server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.1)
        yield process, env
    finally:
        os.killpg(process.pid, signal.SIGCONT)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def running_units(raylet: int) -> list:
    """The pids of the worker processes of the node whose raylet is `raylet` that are running
    a unit (Ray names such a process after its task: `ray::_unit`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            title = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if parent == raylet and title.startswith(b"ray::_unit"):
            found.append(int(entry.name))
    return found


def test_ray_runs_every_unit_and_survives_a_node_killed_mid_unit(moto, tmp):
    try:
        import boto3
        import ray
        from ray.cluster_utils import Cluster
    except ImportError as e:
        if REQUIRED:
            raise
        pytest.skip(f"ray or boto3 is not installed ({e})")
    server, env = moto
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="ckpt")

    def objects(prefix: str) -> dict:
        """The objects directly under `prefix` (no receipts), by name."""
        listed = s3.list_objects_v2(Bucket="ckpt", Prefix=prefix)["Contents"]
        return {
            o["Key"][len(prefix):]: s3.get_object(Bucket="ckpt", Key=o["Key"])["Body"].read()
            for o in listed
            if "/" not in o["Key"][len(prefix):]
        }

    # Eight tensors of 256 KiB: four units of two at --shard-size 600k.
    rng = np.random.default_rng(65)
    tensors = {f"layer.{i}.weight": rng.standard_normal((256, 256)).astype(np.float32) for i in range(8)}
    import safetensors.numpy

    safetensors.numpy.save_file(tensors, str(tmp / "model.safetensors"))
    s3.upload_file(str(tmp / "model.safetensors"), "ckpt", "model.safetensors")
    plan = tmp / "plan.json"
    ztensor("plan", "s3://ckpt/model.safetensors", "s3://ckpt/out/", "--zstd", "3",
            "--shard-size", "600k", "-o", str(plan), env=env)
    units = ztensor_rs.plan_units(plan)
    assert units == 4
    # The same conversion in one process, to compare with.
    ztensor("convert", "s3://ckpt/model.safetensors", "s3://ckpt/one/", "--zstd", "3",
            "--shard-size", "600k", env=env)

    # The cluster's processes inherit the endpoint and credentials; they run in a session
    # directory under this test's own temporary directory, on ports of their own.
    saved = dict(os.environ)
    os.environ.update(env)
    cluster = None
    stopped = False
    # A short temporary directory: Ray's sockets live under it, and a socket's path may not
    # pass 107 bytes.
    short = Path(tempfile.mkdtemp(prefix="zr-"))

    # Ray's own waits (for a node, for its control service) can outlast any test: past five
    # minutes the run stops with every thread's stack rather than hold CI to its limit, moto
    # killed first (Ray's processes die with this one: the cluster watches its parent).
    def give_up():
        faulthandler.dump_traceback(all_threads=True)
        os.killpg(server.pid, signal.SIGKILL)
        shutil.rmtree(short, ignore_errors=True)
        os._exit(1)

    watchdog = threading.Timer(300, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        os.environ["RAY_TMPDIR"] = str(short)
        (short / "ray").mkdir()
        node = {"temp_dir": str(short / "ray")}
        head = {**node, "num_cpus": 0, "include_dashboard": False, "gcs_server_port": free_port()}
        cluster = Cluster(initialize_head=True, head_node_args=head)
        workers = [cluster.add_node(num_cpus=1, **node) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False)
        # Every S3 request stalls while moto is stopped: each unit, once started, waits there.
        os.killpg(server.pid, signal.SIGSTOP)
        stopped = True
        done: dict = {}

        def drive():
            from ztensor_rs.ray import run

            try:
                done["result"] = run(plan, cpus=1, retries=3)
            except BaseException as e:  # reported by the assertion below
                done["error"] = e

        driver = threading.Thread(target=drive)
        driver.start()
        raylets = [w.all_processes["raylet"][0].process.pid for w in workers]
        deadline = time.monotonic() + 120
        while not all(running_units(r) for r in raylets):
            assert time.monotonic() < deadline, "no unit started on each worker node"
            time.sleep(0.2)
        # A unit is running on each node, and cannot finish while moto is stopped (its input
        # and its output are in the bucket): take one node away, its unit unfinished, so that
        # Ray must run that unit again on the other node.
        victim = running_units(raylets[0])
        cluster.remove_node(workers[0], allow_graceful=False)
        for pid in victim:
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and b"ray::_unit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                assert time.monotonic() < deadline, f"worker {pid} outlived its node"
                time.sleep(0.1)
        os.killpg(server.pid, signal.SIGCONT)
        stopped = False
        driver.join(timeout=240)
        assert not driver.is_alive(), "the units did not finish"
        assert "error" not in done, done.get("error")
        result = done["result"]
        assert sorted(r["unit"] for r in result["units"]) == [0, 1, 2, 3]
        assert result["index"] == "s3://ckpt/out/model.zt.index.json"
        first = objects("out/")
        # The entry point, run again on the cluster: every unit found done and verified,
        # nothing written twice.
        again = subprocess.run(
            [sys.executable, "-m", "ztensor_rs.ray", str(plan), "--address", cluster.address, "--json"],
            capture_output=True, text=True, env=env, timeout=300,
        )
        assert again.returncode == 0, again.stderr
        report = json.loads(again.stdout)
        assert [r["fresh"] for r in report["units"]] == [False] * 4, report
        assert objects("out/") == first
    finally:
        if stopped:
            os.killpg(server.pid, signal.SIGCONT)
        if cluster is not None:
            ray.shutdown()
            cluster.shutdown()
        shutil.rmtree(short, ignore_errors=True)
        watchdog.cancel()
        os.environ.clear()
        os.environ.update(saved)

    # Byte for byte the one-process conversion: every shard and the index.
    ours, one = objects("out/"), objects("one/")
    assert sorted(ours) == sorted(one) and len(one) == 5, (sorted(ours), sorted(one))
    for name in one:
        assert ours[name] == one[name], name
    # And it reads back as the tensors written.
    local = tmp / "out"
    local.mkdir()
    for name, data in ours.items():
        (local / name).write_bytes(data)
    loaded = ztensor_rs.load_file(local / "model.zt.index.json")
    assert sorted(loaded) == sorted(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(loaded[name], value)


def test_the_kubernetes_manifests_are_valid_kubernetes_objects():
    try:
        import kubernetes_validate
        import yaml
    except ImportError as e:
        if REQUIRED:
            raise
        pytest.skip(f"kubernetes-validate is not installed ({e})")
    manifests = sorted((REPO / "examples/schedulers").glob("*.yaml"))
    assert len(manifests) == 2, manifests
    checked = 0
    for path in manifests:
        for document in yaml.safe_load_all(path.read_text()):
            if document is None:
                continue
            kubernetes_validate.validate(document, "1.33", strict=True)
            checked += 1
    assert checked >= 2
    # And the validator does refuse what is not one (a misspelt field).
    broken = next(yaml.safe_load_all(manifests[0].read_text()))
    broken["spec"]["completionz"] = broken["spec"].pop("completions")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.33", strict=True)


def test_a_plans_units_run_from_python_as_the_command_line_runs_them(tmp):
    rng = np.random.default_rng(61)
    tensors = {f"t{i}": rng.standard_normal((64, 64)).astype(np.float32) for i in range(6)}
    import safetensors.numpy

    safetensors.numpy.save_file(tensors, str(tmp / "in.safetensors"))
    env = dict(os.environ)
    plan = tmp / "plan.json"
    ztensor("plan", str(tmp / "in.safetensors"), str(tmp / "out") + "/", "--shard-size", "40k",
            "-o", str(plan), env=env)
    units = ztensor_rs.plan_units(plan)
    assert units == 3
    with pytest.raises(ztensor_rs.ZTensorError, match="0, 1, 2"):
        ztensor_rs.finalize(plan)
    with pytest.raises(ztensor_rs.ZTensorError, match="no unit 3: the plan has 3"):
        ztensor_rs.run_unit(plan, 3)
    receipts = [ztensor_rs.run_unit(plan, k, threads=1) for k in range(units)]
    assert [r["fresh"] for r in receipts] == [True] * 3
    assert sum(r["objects"] for r in receipts) == 6
    # Again: found done and verified, the same receipt.
    again = [ztensor_rs.run_unit(plan, k) for k in range(units)]
    assert [r["fresh"] for r in again] == [False] * 3
    assert [r["digest"] for r in again] == [r["digest"] for r in receipts]
    index = ztensor_rs.finalize(plan, deep=True)
    assert index == str(tmp / "out" / "in.zt.index.json")
    # The same bytes as the command line's one-process conversion.
    ztensor("convert", str(tmp / "in.safetensors"), str(tmp / "one") + "/", "--shard-size", "40k", env=env)
    ours = sorted(p.name for p in (tmp / "out").iterdir() if p.is_file())
    assert ours == sorted(p.name for p in (tmp / "one").iterdir() if p.is_file())
    for name in ours:
        assert (tmp / "out" / name).read_bytes() == (tmp / "one" / name).read_bytes(), name
    loaded = ztensor_rs.load_file(index)
    for name, value in tensors.items():
        np.testing.assert_array_equal(loaded[name], value)
    # A shard changed after its unit ran is found out, and the unit refuses to pass it.
    shard = tmp / "out" / receipts[0]["shard"].rsplit("/", 1)[1]
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ztensor_rs.ZTensorError):
        ztensor_rs.finalize(plan, deep=True)
    # A plan that is not one is refused, naming the file.
    (tmp / "bad.json").write_text("{}")
    with pytest.raises(ztensor_rs.ZTensorError, match="bad.json"):
        ztensor_rs.plan_units(tmp / "bad.json")
