"""Issue 44 item 16: `setup.sh` picks torch's CPU build where no NVIDIA driver is present (it installed the
CUDA build, 6.1 GB, on every machine), says which it picked and why, and `--cuda` / `--cpu` choose. Run with
--dry-run (nothing installed) on a PATH the test controls."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fixtures.repopaths import REPO

pytestmark = pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"),
                                reason="an NVIDIA driver is present here: setup.sh picks the CUDA build whatever PATH says")


def _setup(tmp_path: Path, *args: str, nvidia: bool = False, index: str = "http://127.0.0.1:9/none") -> tuple[int, list[str]]:
    """`bash setup.sh --dry-run ARGS` with a PATH of bash, python3 and uname alone (and a stand-in nvidia-smi)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool, path in (("bash", shutil.which("bash")), ("python3", sys.executable), ("uname", shutil.which("uname")),
                       ("dirname", shutil.which("dirname"))):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(path)
    smi = bin_dir / "nvidia-smi"
    if nvidia and not smi.exists():
        smi.write_text("#!/bin/sh\nexit 0\n")
        smi.chmod(0o755)
    elif not nvidia and smi.exists():
        smi.unlink()
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "BANANA100_TORCH_CPU_INDEX": index}
    got = subprocess.run([str(bin_dir / "bash"), str(REPO / "setup.sh"), "--dry-run", *args], env=env,
                         capture_output=True, text=True, timeout=60)
    return got.returncode, (got.stdout + got.stderr).strip().splitlines()


@pytest.fixture
def cpu_index():
    """A stand-in of PyTorch's CPU index that answers /torch/."""

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path.rstrip("/").endswith("/torch") else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()


def test_no_driver_gives_the_cpu_build_and_says_why(tmp_path, cpu_index):
    rc, lines = _setup(tmp_path, "--dev", index=cpu_index)
    assert rc == 0 and lines[0] == ("setup.sh: torch: the cpu build (no NVIDIA driver here: no nvidia-smi, no "
                                    "/proc/driver/nvidia; --cuda for the CUDA build)")
    assert lines[1] == (f"setup.sh: would run: pip install --index-url {cpu_index} torch==2.14.1 torchvision==0.29.1, "
                        "then pip install -e .[dev]")


def test_a_driver_or_cuda_gives_the_cuda_build(tmp_path, cpu_index):
    rc, lines = _setup(tmp_path, nvidia=True, index=cpu_index)
    assert rc == 0 and lines[0] == "setup.sh: torch: the cuda build (an NVIDIA driver is present)"
    assert "--index-url" not in lines[1]
    rc, lines = _setup(tmp_path, "--cuda", index=cpu_index)
    assert rc == 0 and lines[0] == "setup.sh: torch: the cuda build (--cuda)" and "--index-url" not in lines[1]
    rc, lines = _setup(tmp_path, "--cpu", nvidia=True, index=cpu_index)
    assert rc == 0 and lines[0] == "setup.sh: torch: the cpu build (--cpu)" and "--index-url" in lines[1]
    rc, lines = _setup(tmp_path, "--cpu", "--cuda")
    assert rc == 2 and lines == ["setup.sh: --cpu and --cuda: give one of them"]


def test_an_unreachable_cpu_index_falls_back_on_one_line(tmp_path):
    rc, lines = _setup(tmp_path)
    assert rc == 0 and len(lines) == 2
    assert lines[0].startswith("setup.sh: torch: the default build (the CPU build was wanted (no NVIDIA driver here")
    assert "but PyTorch's CPU index (http://127.0.0.1:9/none) cannot be reached" in lines[0]
    assert lines[1] == "setup.sh: would run: pip install torch==2.14.1 torchvision==0.29.1, then pip install -e ."


def test_the_readme_commands_stay_first():
    text = (REPO / "README.md").read_text()
    block = text[text.index("```bash") + len("```bash"):].split("```")[0].strip().splitlines()
    assert block[0].startswith("bash setup.sh && .venv/bin/banana100 demo")
    assert block[1].startswith('bash setup.sh --dev && .venv/bin/python -m pytest -m "not slow"')
