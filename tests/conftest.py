"""Shared test fixtures: offline, isolated caches, and the read-only ../shared folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
IQA_PARAMS = SHARED / "iqa-params"
REFERENCE_IMAGES = SHARED / "reference-images"

# Nothing in the tests may reach the network or write to the user's caches.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "caches"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache / "hf" / "datasets"))
    monkeypatch.setenv("TORCH_HOME", str(cache / "torch"))


@pytest.fixture
def iqa_params() -> Path:
    if not (IQA_PARAMS / "niqe_modelparameters.mat").is_file():
        pytest.skip(f"parameter files not found in {IQA_PARAMS}")
    return IQA_PARAMS
