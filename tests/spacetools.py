"""Helpers for the Space tests: launch `space/app.py` on a free local port, drive Chromium.

docs/make_screenshot.py uses them too, to make the README's picture of the Space from scratch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from repopaths import REPO
APP = REPO / "space" / "app.py"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-dev-shm-usage"]

# Loaded into the app's process: any connection to a non-loopback address is refused and noted,
# so a test can check that the app never tried to reach the internet.
_NO_NETWORK = textwrap.dedent('''
    import os, socket
    _log = os.environ["BANANA100_NETLOG"]
    _connect = socket.socket.connect
    def _guarded(self, address, *a, **k):
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            with open(_log, "a") as f:
                f.write(f"{host}:{address[1]}\\n")
            raise OSError("network disabled by the Space tests")
        return _connect(self, address, *a, **k)
    socket.socket.connect = _guarded
''')


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launched_app(workdir: Path, env: dict, timeout: float = 240):
    """Run `python space/app.py` with `env` added; yield (url, netlog path, log path); stop it after."""
    workdir.mkdir(parents=True, exist_ok=True)
    guard = workdir / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(_NO_NETWORK)
    netlog = workdir / "network-attempts.log"
    netlog.write_text("")
    log = workdir / "app.log"
    port = free_port()
    full_env = {**os.environ, **env, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
                "BANANA100_NETLOG": str(netlog),
                "PYTHONPATH": os.pathsep.join([str(guard), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    url = f"http://127.0.0.1:{port}/"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(APP)], cwd=workdir, env=full_env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the app exited with code {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not answer within {timeout} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield url, netlog, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def browser_page(width: int = 1280, height: int = 900):
    """A page of headless Debian chromium through Playwright; in a test, a skip naming what is missing."""
    if chromium_path() is None or importlib.util.find_spec("playwright") is None:
        import pytest

        pytest.skip("Chromium or playwright not installed (apt-get install chromium; pip install playwright; "
                    ".ci/run does both)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


def wait_first_load(page, url: str, timeout_ms: int = 60_000) -> None:
    """Open the Space and wait until the chain image and the curves are shown."""
    page.goto(url)
    page.wait_for_selector("#step-image img", timeout=timeout_ms)
    page.wait_for_selector("#curves img", timeout=timeout_ms)
