"""The default metrics on a machine without their parameter files (issue 32, items 12 and 17):
input errors come first and alone; online the small files are fetched (from a local HTTP
stand-in here); offline the first line names the skipped metrics and the command that adds them."""

import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import threading
from dataclasses import replace
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image


def _bare_env(tmp_path, **extra):
    """No parameter file anywhere: an empty $BANANA100_WEIGHTS and empty caches."""
    return {**os.environ, "BANANA100_WEIGHTS": str(tmp_path / "none"), "TORCH_HOME": str(tmp_path / "torch"),
            "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", **extra}


def _cli(tmp_path, *args, **env):
    return subprocess.run([sys.executable, "-m", "banana100", *args], capture_output=True, text=True,
                          env=_bare_env(tmp_path, **env), cwd=tmp_path, timeout=300)


def _images(folder, n=2):
    folder.mkdir()
    for i in range(n):
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (96, 96, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return folder


def test_a_wrong_source_is_the_only_line_even_without_parameter_files(tmp_path):
    proc = _cli(tmp_path, "score", "no/such/folder", "--out", "x.parquet")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["banana100 score: error: no/such/folder: no such file or folder"]


def test_offline_the_first_line_names_the_skipped_metrics_and_the_command(tmp_path):
    _images(tmp_path / "imgs")
    proc = _cli(tmp_path, "score", "imgs", "--out", "s.parquet")
    assert proc.returncode == 0, proc.stderr
    first, *rest = proc.stderr.strip().splitlines()
    assert first.startswith("banana100 score: warning: skipping niqe, brisque: "), proc.stderr
    assert "`banana100 weights download niqe brisque`" in first and "HF_HUB_OFFLINE=1" in first
    assert not any("skipping" in line for line in rest)  # said once
    import pandas as pd

    assert set(pd.read_parquet(tmp_path / "s.parquet")["metric"]) == {"piqe"}


@contextlib.contextmanager
def _serve(folder):
    """A plain HTTP server over `folder` on a free local port: yields its URL and the paths asked for."""
    asked = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            asked.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def online_bare(tmp_path, monkeypatch):
    """Online (HF_HUB_OFFLINE off), no parameter file here, and the table's NIQE and BRISQUE
    files served by a local stand-in (stand-in bytes, their sha256 pinned as the table pins the real ones)."""
    import huggingface_hub.constants

    from banana100.metrics import table

    for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "none"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    served = tmp_path / "served"
    served.mkdir()
    with _serve(served) as (url, asked):
        for name in ("niqe", "brisque"):
            spec = table.METRICS[name]
            files = []
            for wf in spec.files:
                body = f"stand-in {wf.filename}".encode() * 100
                (served / wf.filename).write_bytes(body)
                files.append(replace(wf, repo_id=None, url=f"{url}/{wf.filename}", sha256=hashlib.sha256(body).hexdigest(),
                                     size=len(body)))
            monkeypatch.setitem(table.METRICS, name, replace(spec, files=tuple(files)))
        yield served, asked


def test_online_the_small_parameter_files_are_fetched_with_a_line_each(online_bare, tmp_path, caplog):
    from banana100.metrics.athand import metrics_at_hand
    from banana100.metrics.weights import missing

    served, asked = online_bare
    with caplog.at_level(logging.INFO, logger="banana100"):
        assert metrics_at_hand(["piqe", "niqe", "brisque"]) == ["piqe", "niqe", "brisque"]
    assert sorted(p.rsplit("/", 1)[1] for p in asked) == sorted(p.name for p in served.iterdir())
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("fetching niqe_modelparameters.mat for niqe (") and "from 127.0.0.1:" in lines[0]
    assert lines[1].startswith("fetching brisque_live_allmodel, brisque_live_allrange for brisque (")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert missing("niqe") == [] and missing("brisque") == []  # in the cache now: the next run fetches nothing
    assert (tmp_path / "torch" / "hub" / "pyiqa" / "niqe_modelparameters.mat").is_file()


def test_online_a_file_the_host_lacks_skips_its_metric_and_says_why(online_bare, caplog):
    from banana100.metrics.athand import metrics_at_hand

    served, _ = online_bare
    (served / "brisque_live_allrange").unlink()
    with caplog.at_level(logging.INFO, logger="banana100"):
        assert metrics_at_hand(["piqe", "niqe", "brisque"]) == ["piqe", "niqe"]
    warning, = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith("skipping brisque: ") and "404" in warning
    assert "`banana100 weights download brisque`" in warning


def test_never_downloads_when_told_not_to(online_bare, caplog):
    from banana100.metrics.athand import metrics_at_hand

    _, asked = online_bare
    with caplog.at_level(logging.INFO, logger="banana100"):
        assert metrics_at_hand(["piqe", "niqe"], download=False) == ["piqe"]
    assert asked == []
    assert "skipping niqe: " in caplog.text
