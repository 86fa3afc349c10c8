"""The names banana100/__init__.py exports for library users: each resolves to its one home,
`import banana100` stays light, and the README's / the docstring's example runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

import banana100


def test_every_public_name_resolves_to_its_home():
    for name, module in banana100._PUBLIC.items():
        value = getattr(banana100, name)
        assert value.__module__ == module, (name, value.__module__, module)
    assert set(banana100.__all__) == {"__version__", *banana100._PUBLIC}
    assert set(banana100._PUBLIC) <= set(dir(banana100))


def test_import_is_light():
    code = "import sys, banana100; print('torch' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_docstring_example_runs(tmp_path, monkeypatch):
    from banana100 import MetricScorer, build_dataset, generate_chains, make_editor, score_to_parquet

    monkeypatch.chdir(tmp_path)
    Path("photos").mkdir()
    y, x = np.mgrid[0:128, 0:128]
    rgb = np.stack([x * 2, y * 2, (x + y)], -1).clip(0, 255).astype(np.uint8)
    Image.fromarray(rgb).save("photos/coffee.png")
    generate_chains(make_editor("simulated"), "photos/", "replicate", steps=3, repeats=1, out_dir="runs/replicate",
                    progress=False)
    build_dataset([Path("runs/replicate")], Path("banana100-dataset"))
    score_to_parquet("banana100-dataset", ["piqe"], "scores.parquet", progress=False)
    assert pq.read_table("scores.parquet").num_rows == 4
    assert np.isfinite(MetricScorer("piqe", device="cpu").score(["runs/replicate/coffee__replicate__r0/step_003.png"])[0])
