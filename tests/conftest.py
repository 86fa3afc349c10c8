"""Shared test set-up: offline, private caches, and the read-only ../shared folder.

The environment is set when this file is imported, before any test module imports
huggingface_hub, datasets, evaluate or pyiqa: those libraries read their cache locations and
offline flags once, at import, so setting them later (per test) would not take effect.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from fixtures.repopaths import PARAMS as IQA_PARAMS


def shared_missing(*needed: Path) -> str:
    """A skip reason naming what the test needs from the read-only ../shared folder and lacks:
    the parameter files, the reference-image folders. "" when everything is there."""
    parts = []
    for path in needed:
        if path == IQA_PARAMS:
            files = ["niqe_modelparameters.mat", "brisque_live_allmodel", "brisque_live_allrange",
                     "ILNIQE_templateModel.mat"]
            absent = [f for f in files if not (path / f).is_file()]
            if absent:
                parts.append(f"{', '.join(absent)} in {path} (`banana100 weights download niqe brisque ilniqe "
                             "--to DIR` online, then put them there)")
        elif not path.is_dir():
            parts.append(f"the reference images in {path}")
    return ("needs " + "; ".join(parts)) if parts else ""

# Nothing in the tests may reach the network or touch the user's caches.
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="banana100-tests-"))
os.environ.update(
    HF_HOME=str(_SESSION_CACHE / "hf"),
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    HF_EVALUATE_OFFLINE="1",
    TORCH_HOME=str(_SESSION_CACHE / "torch"),
    # gradio caches served files by content hash under one shared /tmp/gradio by default;
    # two test runs at once then read each other's half-written files
    GRADIO_TEMP_DIR=str(_SESSION_CACHE / "gradio"),
)


@pytest.fixture(scope="session", autouse=True)
def _library_temp_files_in_the_session_folder(tmp_path_factory):
    """Temporary files the libraries make in this process go under the session's folder, which
    is removed at the end (gradio_client leaves an empty folder in the temp dir per download).
    pytest's own tmp_path is placed first, so it stays where pytest keeps it."""
    tmp_path_factory.getbasetemp()
    folder = _SESSION_CACHE / "tmp"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(folder))
        yield


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


# The user's weights folder reaches only the tests marked `needs_weights` (see below).
USER_WEIGHTS = os.environ.pop("BANANA100_WEIGHTS", None)


@pytest.fixture(autouse=True)
def _user_weights_for_needs_weights(request, monkeypatch):
    """Tests marked `needs_weights` look in the user's $BANANA100_WEIGHTS, then ../shared/iqa-params."""
    if request.node.get_closest_marker("needs_weights") is not None:
        dirs = [d for d in (USER_WEIGHTS, str(IQA_PARAMS)) if d]
        monkeypatch.setenv("BANANA100_WEIGHTS", os.pathsep.join(dirs))


@pytest.fixture
def iqa_params() -> Path:
    if not (IQA_PARAMS / "niqe_modelparameters.mat").is_file():
        pytest.skip(f"parameter files (niqe_modelparameters.mat, brisque_live_allmodel, ...) not found in {IQA_PARAMS} "
                    "(the read-only ../shared folder); downloadable when online: "
                    "`banana100 weights download niqe brisque ilniqe --to DIR`, then place them in that folder")
    return IQA_PARAMS


@pytest.fixture
def weights_from_shared(iqa_params, monkeypatch) -> Path:
    """Metrics find their parameter files in ../shared/iqa-params (read in place, never copied)."""
    monkeypatch.setenv("BANANA100_WEIGHTS", str(iqa_params))
    return iqa_params


@pytest.fixture
def sources(tmp_path) -> Path:
    """A folder of two small source images of different sizes."""
    from banana100.testing.runfolder import write_source

    folder = tmp_path / "sources"
    folder.mkdir()
    write_source(folder / "alpha.png", seed=1)
    write_source(folder / "beta.png", h=40, w=56, seed=2)
    return folder


def _devices() -> list:
    """cpu, and cuda (marked `gpu`) where torch sees one: the GPU checks run as tests there."""
    import torch

    cuda = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA device visible to torch")])
    return ["cpu", cuda]


@pytest.fixture(params=_devices())
def device(request) -> str:
    """Each device a test should run on: "cpu" everywhere, "cuda" where a GPU is (`pytest -m gpu`
    runs only those)."""
    return request.param
