"""The weights store: where parameter files are found, checked, and what a miss says.

Nothing here reaches the network: HF_HUB_OFFLINE=1, TORCH_HOME and the Hugging Face cache point
into pytest's temporary folder, and the tests that exercise the download path stub it out.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from banana100.errors import WeightsChecksumError
from banana100.metrics import weights
from banana100.errors import UnknownMetricError, WeightsNotFoundError
from banana100.metrics.table import PYIQA_WEIGHTS_REPO, get_metric

from fixtures.repopaths import SHARED
PARAMS = SHARED / "iqa-params"
NIQE_FILE = "niqe_modelparameters.mat"
NIQE_SHA = "fa2aa4d12dd9595c3fb6bf8b4e1a15c79d5d1469238d0901c88dead195be578d"

needs_params = pytest.mark.skipif(not (PARAMS / NIQE_FILE).is_file(), reason=f"needs niqe_modelparameters.mat in {PARAMS} (`banana100 weights download niqe --to DIR` online)")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """Offline, with empty private caches (pyiqa's and the Hugging Face one)."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.delenv(weights.ENV_VAR, raising=False)
    return tmp_path


@pytest.fixture
def online(monkeypatch):
    """Pretend the network is allowed (HF_HUB_OFFLINE unset); tests stub what it would do."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection or hf_hub_download call fails the test loudly."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"network access attempted: {args}")

    import huggingface_hub

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    return calls


def fake_hf_cache(root: Path, filename: str, source: Path, repo_id: str = PYIQA_WEIGHTS_REPO) -> Path:
    """Lay out a huggingface_hub cache entry for `filename` (a link to `source`)."""
    repo_dir = Path(root) / ("models--" + repo_id.replace("/", "--"))
    rev = "0" * 40
    snap = repo_dir / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(rev)
    (snap / filename).symlink_to(source)
    return snap / filename


# -- a missing file -------------------------------------------------------------------------


def test_missing_file_names_file_metric_url_and_places(offline, no_network):
    with pytest.raises(WeightsNotFoundError) as exc:
        weights.files_for("niqe")
    msg = str(exc.value)
    assert NIQE_FILE in msg
    assert "NIQE" in msg
    assert "BANANA100_WEIGHTS" in msg
    assert f"$BANANA100_WEIGHTS/{NIQE_FILE}" in msg
    assert f"https://huggingface.co/{PYIQA_WEIGHTS_REPO}/resolve/main/{NIQE_FILE}" in msg
    assert str(offline / "torch-home" / "hub" / "pyiqa" / NIQE_FILE) in msg  # pyiqa's cache path
    assert "HF_HUB_OFFLINE" in msg
    assert no_network == []


def test_missing_lists_absent_files_and_is_available(no_network):
    assert weights.missing("niqe") == [NIQE_FILE]
    assert weights.missing("ilniqe") == ["ILNIQE_templateModel.mat"]
    assert not weights.is_available("brisque")
    assert weights.missing("piqe") == [] and weights.is_available("piqe")  # needs no file
    assert weights.files_for("piqe") == []


def test_unknown_metric():
    with pytest.raises(UnknownMetricError):
        weights.files_for("no-such-metric")


def test_message_names_the_folder_when_set(monkeypatch, tmp_path, no_network):
    monkeypatch.setenv(weights.ENV_VAR, str(tmp_path / "empty"))
    with pytest.raises(WeightsNotFoundError, match=str(tmp_path / "empty" / NIQE_FILE).replace("\\", "\\\\")):
        weights.resolve(NIQE_FILE, metric="niqe")


# -- where files are found ------------------------------------------------------------------


@needs_params
def test_banana100_weights_folder_is_found(monkeypatch, no_network):
    monkeypatch.setenv(weights.ENV_VAR, str(PARAMS))
    for metric in ("niqe", "brisque", "ilniqe"):
        paths = weights.files_for(metric)
        assert paths == [PARAMS / wf.filename for wf in get_metric(metric).backend_files()]
        for backend in get_metric(metric).backends:
            assert weights.files_for(metric, backend=backend) == [PARAMS / wf.filename for wf in get_metric(metric).backend_files(backend)]
        assert weights.is_available(metric) and weights.missing(metric) == []


@needs_params
def test_several_folders_with_pathsep(monkeypatch, tmp_path, no_network):
    monkeypatch.setenv(weights.ENV_VAR, os.pathsep.join([str(tmp_path / "nothing-here"), str(PARAMS)]))
    assert weights.resolve(NIQE_FILE) == PARAMS / NIQE_FILE


@pytest.mark.integration
@needs_params
def test_pyiqa_cache_is_found(offline, no_network):
    cache = offline / "torch-home" / "hub" / "pyiqa"
    cache.mkdir(parents=True)
    (cache / NIQE_FILE).symlink_to(PARAMS / NIQE_FILE)
    assert weights.pyiqa_cache_dir() == cache
    assert weights.resolve(NIQE_FILE) == cache / NIQE_FILE


@needs_params
def test_huggingface_cache_is_found(offline, no_network):
    expected = fake_hf_cache(offline / "hf-home" / "hub", NIQE_FILE, PARAMS / NIQE_FILE)
    assert weights.resolve(NIQE_FILE) == expected


@needs_params
def test_env_folder_wins_over_caches(offline, monkeypatch, no_network):
    cache = offline / "torch-home" / "hub" / "pyiqa"
    cache.mkdir(parents=True)
    (cache / NIQE_FILE).symlink_to(PARAMS / NIQE_FILE)
    monkeypatch.setenv(weights.ENV_VAR, str(PARAMS))
    assert weights.resolve(NIQE_FILE) == PARAMS / NIQE_FILE


# -- sha256 -----------------------------------------------------------------------------------


def test_sha256_mismatch_is_caught(monkeypatch, tmp_path, no_network):
    (tmp_path / NIQE_FILE).write_bytes(b"not the LIVE model")
    monkeypatch.setenv(weights.ENV_VAR, str(tmp_path))
    with pytest.raises(WeightsChecksumError) as exc:
        weights.files_for("niqe")
    msg = str(exc.value)
    assert NIQE_FILE in msg and str(tmp_path / NIQE_FILE) in msg
    assert NIQE_SHA in msg  # what the table expects
    assert weights.sha256_of(tmp_path / NIQE_FILE) in msg  # what the file has
    assert isinstance(exc.value, WeightsNotFoundError)  # callers catching "no usable file" see it
    assert not weights.is_available("niqe")
    assert weights.missing("niqe") == [NIQE_FILE]


@needs_params
def test_sha256_of_shared_file_matches_table():
    assert weights.sha256_of(PARAMS / NIQE_FILE) == NIQE_SHA


def test_explicit_sha256_for_files_outside_the_table(monkeypatch, tmp_path, no_network):
    (tmp_path / "extra.bin").write_bytes(b"abc")
    monkeypatch.setenv(weights.ENV_VAR, str(tmp_path))
    good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
    assert weights.resolve("extra.bin", sha256=good) == tmp_path / "extra.bin"
    assert weights.resolve("extra.bin") == tmp_path / "extra.bin"  # unknown file: no check
    with pytest.raises(WeightsChecksumError, match="extra.bin"):
        weights.resolve("extra.bin", sha256="0" * 64)


# -- network ------------------------------------------------------------------------------------


def test_offline_attempts_no_network(no_network):
    with pytest.raises(WeightsNotFoundError, match="HF_HUB_OFFLINE=1"):
        weights.resolve(NIQE_FILE)
    assert not weights.is_available("niqe", allow_download=True)  # offline wins when None...
    assert no_network == []


def test_allow_download_false_attempts_no_network(online, no_network):
    with pytest.raises(WeightsNotFoundError, match="allow_download=False"):
        weights.resolve(NIQE_FILE, allow_download=False)
    assert weights.missing("niqe") == [NIQE_FILE]  # missing() never downloads
    assert no_network == []


def test_unreachable_hub_fails_fast_and_quietly(online, monkeypatch, capsys):
    import huggingface_hub

    def no_route(*args, **kwargs):
        raise OSError(101, "Network is unreachable")

    def must_not_run(*args, **kwargs):
        raise AssertionError("hf_hub_download called although the Hub is unreachable")

    monkeypatch.setattr(socket, "create_connection", no_route)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", must_not_run)
    t0 = time.perf_counter()
    with pytest.raises(WeightsNotFoundError, match="cannot reach") as exc:
        weights.resolve(NIQE_FILE)
    assert time.perf_counter() - t0 < 5
    assert "huggingface.co" in str(exc.value)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


@needs_params
def test_download_is_used_and_checked(online, monkeypatch, tmp_path):
    import huggingface_hub

    calls = []

    def fake_download(repo_id, filename, **kwargs):
        calls.append((repo_id, filename))
        return str(PARAMS / filename)

    monkeypatch.setattr(weights, "hub_unreachable", lambda timeout=3.0: "")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    assert weights.resolve(NIQE_FILE) == PARAMS / NIQE_FILE
    assert calls == [(PYIQA_WEIGHTS_REPO, NIQE_FILE)]

    bad = tmp_path / "bad" / NIQE_FILE
    bad.parent.mkdir()
    bad.write_bytes(b"truncated")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo_id, filename, **kw: str(bad))
    with pytest.raises(WeightsChecksumError, match="fresh download"):
        weights.resolve(NIQE_FILE)


def test_failed_download_gives_one_message_no_trace(online, monkeypatch, capsys):
    import huggingface_hub

    def broken(*args, **kwargs):
        raise RuntimeError("404 Client Error: Entry Not Found\n  (long server trace)")

    monkeypatch.setattr(weights, "hub_unreachable", lambda timeout=3.0: "")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    with pytest.raises(WeightsNotFoundError) as exc:
        weights.resolve(NIQE_FILE)
    msg = str(exc.value)
    assert "download failed (RuntimeError: 404 Client Error: Entry Not Found)" in msg
    assert "long server trace" not in msg
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_import_does_not_download():
    """A fresh interpreter with sockets disabled can import the store, the engine and the cards."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise SystemExit('network access at import time')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse\n"
        "import banana100.metrics.weights, banana100.metrics.engine.scorer, banana100.metrics.hub.cards\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    r = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_hub_url():
    assert weights.hub_url("a.pth") == f"https://huggingface.co/{PYIQA_WEIGHTS_REPO}/resolve/main/a.pth"
    assert weights.hub_url("b.pt", "org/repo") == "https://huggingface.co/org/repo/resolve/main/b.pt"
