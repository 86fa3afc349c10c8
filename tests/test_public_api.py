"""The names banana100/__init__.py exports for library users: each resolves to its one home,
`import banana100` stays light, and the README's / the docstring's example runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
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


@pytest.mark.integration  # imports evaluate in a fresh interpreter: about 30 s on 2 busy cores
def test_a_script_beside_the_clone_imports_the_library(tmp_path):
    """The clone at ~/banana100, a script in ~: the clone folder must not shadow the install as an
    empty namespace package (`No module named 'banana100.metrics.module'`). setup.sh adds a .pth
    file that puts the editable install's import hook before the path search."""
    import importlib.metadata
    import json

    from fixtures.repopaths import REPO as repo
    # the installed dist-info (a banana100.egg-info left in the clone by a build has no direct_url.json)
    direct = next((d.read_text("direct_url.json") for d in importlib.metadata.distributions(name="banana100")
                   if d.read_text("direct_url.json")), None)
    if not direct or not json.loads(direct).get("dir_info", {}).get("editable"):
        pytest.skip("banana100 is not an editable install of a clone here (a wheel cannot be shadowed this way)")
    (tmp_path / "banana100").symlink_to(repo, target_is_directory=True)  # ~/banana100 = the clone
    (tmp_path / "script.py").write_text("import banana100.metrics.module, banana100\nprint(banana100.__file__)\n")
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, (
        f"{proc.stderr.strip().splitlines()[-1]}: the editable install can be shadowed; reinstall with "
        "`bash setup.sh --dev` (its banana100-editable-first.pth puts the install's hook first)")
    assert Path(proc.stdout.strip()) == repo / "banana100" / "__init__.py"


def test_scoring_needs_neither_datasets_nor_evaluate():
    """A GPU machine gets only what scoring needs (bench/gpu/gpu_check.py there): the engine imports and
    scores with `datasets` and `evaluate` unimportable."""
    code = ("import sys; sys.modules['datasets'] = sys.modules['evaluate'] = None\n"
            "import numpy as np\n"
            "from banana100.metrics.engine.scorer import MetricScorer\n"
            "from banana100.metrics import resolve\n"
            "from banana100.metrics.engine import fastpaths\n"
            "rgb = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)\n"
            "print(MetricScorer('piqe', device='cpu').score_arrays([rgb])[0] > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True"]
