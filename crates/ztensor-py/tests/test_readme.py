"""The README's Python example runs as written."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from conftest import REPO


def test_readme_python_example_runs(tmp, capsys):
    text = (REPO / "README.md").read_text()
    section = text.split("## Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's Python section"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        exec(compile(blocks[0], "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "zTensor 1.2 ['b', 'w'] {'format': 'np'}"
    assert out[1] == "[4. 5.]"
    assert out[2] == "f32"


def test_readme_torch_example_runs(tmp):
    text = (REPO / "README.md").read_text()
    section = text.split("### PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's PyTorch section"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        import safetensors.torch
        import torch

        # The example makes every file it reads (nothing is put there for it).
        assert not os.listdir(".")
        scope: dict = {}
        exec(compile(blocks[0], "README.md", "exec"), scope)
        assert torch.equal(scope["top"], scope["sd"]["w"][0:2])
        assert scope["tensors"]["w"].dtype == torch.bfloat16
        # The safetensors file it wrote is one: safetensors' own loader reads it, exactly.
        theirs = safetensors.torch.load_file("model.safetensors")
        assert theirs.keys() == scope["sd"].keys()
        for name, tensor in scope["sd"].items():
            assert theirs[name].dtype == tensor.dtype, name
            assert torch.equal(theirs[name].view(torch.uint8), tensor.view(torch.uint8)), name
        assert scope["again"].keys() == scope["tensors"].keys()
    finally:
        os.chdir(cwd)


def test_readme_dlpack_example_runs(tmp):
    text = (REPO / "README.md").read_text()
    section = text.split("### PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2 and "from_dlpack" in blocks[1], "no DLPack example in the README"
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        import torch

        import ztensor_rs.torch

        import numpy as np

        w = torch.randn(4, 4).to(torch.bfloat16)
        fp8 = torch.tensor([0.5, -2.0]).to(torch.float8_e4m3fn)
        scale = torch.tensor([0.25, 4.0])
        ztensor_rs.torch.save_file({"w": w, "fp8": fp8, "scale": scale}, "model.zt")
        scope: dict = {}
        exec(compile(blocks[1], "README.md", "exec"), scope)
        # NumPy: its own types by DLPack, bfloat16 as ml_dtypes through get_tensor; what the
        # README says NumPy refuses, it refuses.
        assert scope["scale"].dtype == np.float32 and scope["scale"].tolist() == [0.25, 4.0]
        assert str(scope["w_np"].dtype) == "bfloat16"
        assert scope["w_np"].view(np.uint16).tolist() == w.view(torch.int16).numpy().view(np.uint16).tolist()
        with ztensor_rs.safe_open("model.zt") as f:
            for name in ["w", "fp8"]:
                try:
                    np.from_dlpack(f.get_object(name))
                except RuntimeError as e:
                    assert "Unsupported dtype" in str(e), e
                else:
                    raise AssertionError(f"NumPy took {name} by DLPack; the README says it does not")
        assert scope["w"].dtype == torch.bfloat16 and torch.equal(scope["w"], w)
        assert str(scope["fp8"].dtype) == "float8_e4m3fn"
        assert torch.equal(scope["mine"], w) and scope["mine"].data_ptr() != scope["w"].data_ptr()
    finally:
        os.chdir(cwd)


def test_the_namespace_is_the_documented_api():
    import ztensor_rs

    # Submodules appear once imported (ztensor_rs.torch, by a test or another import).
    submodules = {"torch"}
    public = {name for name in dir(ztensor_rs) if not name.startswith("_")} - submodules
    assert public == set(ztensor_rs.__all__), public ^ set(ztensor_rs.__all__)
    assert len(ztensor_rs.__all__) == len(set(ztensor_rs.__all__))
    for name in ztensor_rs.__all__:
        assert getattr(ztensor_rs, name).__doc__, name
    # What star-import gives is that list, and nothing the implementation imports.
    scope: dict = {}
    exec("from ztensor_rs import *", scope)
    assert set(scope) - {"__builtins__"} == set(ztensor_rs.__all__)
    assert isinstance(ztensor_rs.__version__, str)


def test_the_torch_namespace_is_its_documented_api():
    import ztensor_rs.torch as pt

    public = {name for name in dir(pt) if not name.startswith("_")}
    # What the module imports for itself: the modules and typing names.
    imported = {"dcp", "os", "warnings", "torch", "annotations", "Any", "Dict", "List", "Mapping", "Optional", "Tuple", "PathLike", "UnsupportedError"}
    assert public - imported == set(pt.__all__), (public - imported) ^ set(pt.__all__)
    assert set(pt.__all__) == {"load_file", "save_file", "load", "save", "safe_open"}
    for name in pt.__all__:
        assert getattr(pt, name).__doc__, name


# What the top-to-bottom run changes in the README's commands, each with its reason; nothing
# else is changed or left out.
SUBSTITUTED = {
    # The binary under test is on PATH instead (building a release copy takes minutes).
    "cargo install --locked --path crates/ztensor-cli": "true",
    # The test suite this test belongs to.
    "cargo xtask test": "true",
    # The test environment has moto already (requirements-test.txt): no network here.
    "pip install 'moto[server]'": "true",
}


def readme_blocks(text: str) -> list[tuple[int, str, str]]:
    """Every fenced block of `text`: (line, language, body), in order."""
    blocks, language, body, start = [], None, [], 0
    for number, line in enumerate(text.splitlines(), 1):
        if language is None and line.startswith("```"):
            language, body, start = line[3:].strip(), [], number
        elif language is not None and line.startswith("```"):
            blocks.append((start, language, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    assert language is None, "a block is not closed"
    return blocks


def shell_commands(body: str) -> list[tuple[str, list[str]]]:
    """The commands of a `sh` block (continuations joined), each with the lines the block
    shows it printing: comment lines right after it that read as its output (`# note: …`)."""
    commands, pending = [], ""
    for line in body.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.startswith("# note: ") and commands:
            commands[-1][1].append(line[2:])
        elif line.strip() and not line.lstrip().startswith("#"):
            commands.append((line, []))
    return commands


def steady(text: str) -> str:
    """Output with what changes from run to run (seconds, measured peak memory) made constant."""
    text = re.sub(r" in \d+\.\d\d s", " in T s", text)
    return re.sub(r", peak memory [\d.]+ [kMG]?B", ", peak memory P", text)


def test_the_readme_runs_top_to_bottom(tmp):
    """Every `sh`, `console` and `python` block of README.md, in order, in one shell (so `cd`
    and `export` carry over, as for a reader pasting them), from the repository root with the
    ztensor under test on PATH: every command succeeds, and each `console` block's commands
    print what the block shows (times and measured memory aside). `text` blocks are shown
    output, `rust` blocks compiled by their crate's tests. The only changes are SUBSTITUTED's
    and the S3 server's port (a free one instead of 5000)."""
    import shutil
    import signal
    import socket
    import subprocess
    import sys

    from test_registry import cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp / "log"
    log.mkdir()
    env = dict(os.environ)
    env["PATH"] = f"{cli().parent}:{Path(sys.executable).parent}:{env['PATH']}"
    env["TMPDIR"] = str(tmp)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "ZTENSOR_REMOTE_STATS"):
        env.pop(name, None)
    assert shutil.which("moto_server", path=env["PATH"]), "moto's server is in the environment"

    script = ["set -u", f"cd {REPO}", "trap 'kill $(jobs -p) 2>/dev/null' EXIT"]
    # step id -> (README line, kind, command, what it is shown printing: a console block's
    # output, a sh block's `# note:` lines, None for Python)
    steps: dict[str, tuple[int, str, str, object]] = {}
    used = set()
    for start, language, body in readme_blocks((REPO / "README.md").read_text()):
        if language == "sh":
            for command, printed in shell_commands(body):
                for original, instead in SUBSTITUTED.items():
                    if original in command:
                        command = command.replace(original, instead)
                        used.add(original)
                command = command.replace("-p 5000", f"-p {port}")
                command = command.replace(":5000", f":{port}")
                steps[f"s{len(steps)}"] = (start, "sh", command, printed)
        elif language == "console":
            current = None
            for line in body.splitlines():
                if line.startswith("$ "):
                    current = f"s{len(steps)}"
                    steps[current] = (start, "console", line[2:], "")
                else:
                    assert current is not None, f"README.md:{start}: output before a command"
                    line_, kind, command, shown = steps[current]
                    steps[current] = (line_, kind, command, shown + line + "\n")
        elif language == "python":
            name = f"s{len(steps)}"
            (log / f"{name}.py").write_text(body + "\n")
            steps[name] = (start, "python", f"python {log / name}.py", None)
    assert used == set(SUBSTITUTED), f"substitutions no longer used: {set(SUBSTITUTED) - used}"
    for name, (_, kind, command, _) in steps.items():
        script.append(f"eval {shlex.quote(command)} > {log / name}.out 2>&1; echo $? > {log / name}.rc")
        if "moto_server" in command:
            # Until the server answers (it takes a moment to start).
            wait = (
                "import socket, time\n"
                "for _ in range(200):\n"
                "    try:\n"
                f"        socket.create_connection(('127.0.0.1', {port}), 1).close(); break\n"
                "    except OSError:\n"
                "        time.sleep(0.1)\n"
            )
            script.append(f"python -c {shlex.quote(wait)}")
    (log / "readme.sh").write_text("\n".join(script) + "\n")
    # In a process group of its own, stopped whole at the end: a server the README starts in
    # the background (`moto_server ... &`) is a grandchild the script's own trap cannot reach.
    script_run = subprocess.Popen(["bash", str(log / "readme.sh")], env=env, start_new_session=True)
    try:
        returncode = script_run.wait(timeout=900)
    finally:
        try:
            os.killpg(script_run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        script_run.wait()
    assert returncode == 0, "the script itself failed"
    failures = []
    for name, (line, kind, command, shown) in steps.items():
        said = (log / f"{name}.out").read_text()
        status = int((log / f"{name}.rc").read_text())
        if status != 0:
            failures.append(f"README.md:{line}: `{command}` exited {status}:\n{said}")
        # A blank line between a block's commands belongs to the block, not to the output.
        elif kind == "sh" and any(line not in said.splitlines() for line in shown):
            failures.append(f"README.md:{line}: `{command}` printed\n{said}without {shown}")
        elif kind == "console" and steady(said) != steady(shown.rstrip("\n") + "\n"):
            failures.append(
                f"README.md:{line}: `{command}` printed\n{said}where the README shows\n{shown}"
            )
    assert not failures, "\n".join(failures)
    # Every block ran: as many steps as the README has commands and Python blocks.
    assert len(steps) >= 40, len(steps)
