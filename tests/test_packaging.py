"""Release mechanics, checked offline: the wheel and the sdist hold what they must, the metric
folders are what evaluate and the Hub expect, and the built wheel installed into a fresh venv
outside the repository runs `banana100 demo` and loads a copied metric folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from fixtures.repopaths import PARAMS as IQA_PARAMS, REPO

from banana100 import __version__, about, extras
from banana100.metrics.hub.publish import (SENSITIVITY, card_front_matter, check_metric_folder, metric_names, push_metrics,
                               space_requirements, stage_metric_folders, sync_metric_folders)
from banana100.metrics.table import DETECTORS, ROSTER

IGNORED = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                 ".pytest_cache", "demo_output", "runs")


def _source_tree(dest: Path) -> Path:
    """The files a release is built from: git's tracked and not-ignored files in a clone, the
    whole tree (less build outputs) in an unpacked sdist."""
    if (REPO / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True).stdout.decode().split("\0")
        for rel in filter(None, listed):
            if (REPO / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, dest / rel)
    else:
        shutil.copytree(REPO, dest, ignore=IGNORED, dirs_exist_ok=True)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """sdist and wheel, built with setuptools' PEP 517 hooks (offline, no build isolation)."""
    src = _source_tree(tmp_path_factory.mktemp("src"))
    code = ("import setuptools.build_meta as b, json; "
            "print(json.dumps([b.build_sdist('dist'), b.build_wheel('dist')]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    sdist, wheel = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"src": src, "sdist": src / "dist" / sdist, "wheel": src / "dist" / wheel}


# -- what the distributions hold (fast) --------------------------------------------------------


@pytest.mark.integration
def test_wheel_holds_the_library_and_every_metric_folder(built):
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    assert {"banana100/cli/__init__.py", "banana100/cli/common.py", "banana100/cli/weights.py",
            "banana100/metrics/native/agreement.json", "banana100/metrics/native/flat_regime.json",
            "banana100/dataset/card_template.md", "banana100/generation/settings.yaml",
            "banana100/chains/editors/base.py", "banana100/explore/__init__.py",
            "banana100/explore/explorer.py"} <= names
    for name in (*ROSTER, *DETECTORS, SENSITIVITY):
        for rel in (f"{name}.py", "README.md", "requirements.txt", "app.py"):
            assert f"banana100/metric_modules/{name}/{rel}" in names, (name, rel)
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.integration
def test_wheel_metadata_core_is_light_and_extras_bring_the_rest(built):
    with zipfile.ZipFile(built["wheel"]) as z:
        meta = Parser().parsestr(z.read(f"banana100-{__version__}.dist-info/METADATA").decode())
    assert meta["Version"] == __version__
    requires = meta.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    for heavy in ("pyiqa", "google-genai", "gradio", "timm", "torchvision", "playwright", "pytest"):
        assert not any(r.lower().startswith(heavy) for r in core), (heavy, core)
    assert any(r.startswith("torch") for r in core) and any(r.startswith("evaluate") for r in core)
    assert set(meta.get_all("Provides-Extra")) >= {"deep", "gemini", "space", "all", "dev"}
    assert any(r.startswith("pyiqa==0.1.16") and "extra == \"deep\"" in r for r in requires)
    assert any(r.startswith("google-genai") and "extra == \"gemini\"" in r for r in requires)


@pytest.mark.integration
def test_sdist_holds_everything_its_tests_need(built):
    with tarfile.open(built["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    tests = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("*.py")}
    assert "tests/conftest.py" in tests and tests <= names, sorted(tests - names)
    for rel in ("pyproject.toml", "MANIFEST.in", "setup.sh", "LICENSE", "README.md", "space/app.py",
                "space/requirements.txt", "generation/settings.yaml", "dataset_script/build.py",
                "metrics/niqe/requirements.txt", "metrics/banana100_sensitivity/app.py",
                "tests/fixtures/data/native_scores_snapshot.json", "tests/fixtures/data/pyiqa_reference_scores.json"):
        assert rel in names, rel
    assert not any("__pycache__" in n or n.startswith(".venv/") for n in names)


def test_versions_agree():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__ == about.VERSION
    assert about.RELEASE_TAG == f"v{__version__}"
    assert project["urls"]["Repository"] == about.CODE_REPOSITORY and project["urls"]["Paper"] == about.PAPER_URL


# -- the metric folders as the Hub and evaluate expect them ----------------------------------


def test_committed_metric_folders_are_in_step_with_about():
    """requirements.txt, the `# From:` hints, the widget apps and space/requirements.txt are
    what `python -m banana100.metrics.hub.publish --sync` writes from banana100/about.py."""
    assert sync_metric_folders(REPO / "metrics", check=True, space_dir=REPO / "space") == []
    # the protocol's card is written by hand: its install line must still be about.py's
    assert f'pip install "{extras.requirement()}"' in (REPO / "metrics" / SENSITIVITY / "README.md").read_text()
    assert metric_names(REPO / "metrics") == [*ROSTER, *DETECTORS, SENSITIVITY]


def test_requirement_lines_point_at_the_release():
    from packaging.requirements import Requirement

    for wanted, path in (((), REPO / "metrics" / "niqe" / "requirements.txt"),
                         (("deep",), REPO / "metrics" / "topiq_nr" / "requirements.txt"),
                         (("space",), REPO / "space" / "requirements.txt")):
        lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
        (req,) = [Requirement(ln) for ln in lines]
        assert req.name == "banana100" and set(req.extras) == set(wanted)
        assert req.url == f"git+{about.CODE_REPOSITORY}@{about.RELEASE_TAG}"


def test_dry_run_stages_23_checked_spaces(tmp_path, capsys):
    from banana100.cli import main

    assert main(["publish-metrics", "--org", "someone", "--dry-run", "--stage", str(tmp_path / "stage")]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing uploaded" in out and f"git+{about.CODE_REPOSITORY}@{about.RELEASE_TAG}" in out
    assert sum(f"someone/{n}:" in out for n in (*ROSTER, *DETECTORS, SENSITIVITY)) == 23
    for name in (*ROSTER, *DETECTORS, SENSITIVITY):
        folder = tmp_path / "stage" / name
        meta = card_front_matter(folder / "README.md")
        assert meta["sdk"] == "gradio" and (folder / meta["app_file"]).is_file()
        assert sorted(p.name for p in folder.iterdir()) == sorted(["README.md", "app.py", f"{name}.py", "requirements.txt"])


def test_source_override_rewrites_requirements_and_hints(tmp_path):
    from evaluate.loading import get_imports

    source = "https://example.org/wheels/banana100-0.1.0-py3-none-any.whl"
    [(_, folder)] = stage_metric_folders(tmp_path, ["clipiqa"], source=source, metrics_dir=REPO / "metrics")
    assert (folder / "requirements.txt").read_text().splitlines()[-1] == f"banana100[deep] @ {source}"
    assert f'pip install "banana100[deep] @ {source}"' in (folder / "README.md").read_text()
    assert get_imports(str(folder / "clipiqa.py")) == [("library", "banana100", f'"banana100[deep] @ {source}"', None)]


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "app.py").unlink(), "declares app_file 'app.py', which is not in the folder"),
    (lambda f: (f / "README.md").write_text((f / "README.md").read_text().replace("pip install", "pip get")),
     "README.md does not show the install line"),
    (lambda f: (f / "requirements.txt").write_text("banana100>=0.1\n"), "requirements.txt: expected the one line"),
    (lambda f: (f / "niqe.py").write_text((f / "niqe.py").read_text().split("  # From:")[0] + "\nclass X: pass\n"),
     "evaluate would read the install hints [('banana100', 'banana100')]"),
])
def test_check_refuses_a_folder_the_hub_could_not_use(tmp_path, damage, message):
    from banana100.errors import DatasetError

    [(_, folder)] = stage_metric_folders(tmp_path, ["niqe"], metrics_dir=REPO / "metrics")
    damage(folder)
    with pytest.raises(DatasetError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        check_metric_folder(folder, "niqe")


@pytest.mark.integration  # a subprocess with evaluate but no banana100 (~10 s)
def test_evaluate_names_the_pip_line_when_banana100_is_absent(tmp_path):
    """What a Hub user without banana100 sees: evaluate's ImportError quoting requirements.txt's line."""
    shutil.copytree(REPO / "metrics" / "topiq_nr", tmp_path / "topiq_nr")
    code = ("import sys, evaluate; sys.modules['banana100'] = None\n"
            f"try:\n    evaluate.load({str(tmp_path / 'topiq_nr')!r})\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300).stdout
    assert f"pip install \"{extras.requirement(('deep',))}\"" in out


def test_push_uploads_each_folder_as_a_space(tmp_path, monkeypatch):
    """Without network: HfApi replaced by a recorder; one create_repo + upload_folder per Space."""
    import huggingface_hub

    calls = []

    class Recorder:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kw):
            calls.append(("create", repo_id, kw["repo_type"], kw["space_sdk"]))

        def upload_folder(self, repo_id, folder_path, repo_type, commit_message):
            calls.append(("upload", repo_id, repo_type, sorted(p.name for p in Path(folder_path).iterdir())))

    monkeypatch.setattr(huggingface_hub, "HfApi", Recorder)
    push_metrics("someone", ["piqe", SENSITIVITY], stage_dir=tmp_path, metrics_dir=REPO / "metrics")
    assert calls == [
        ("create", "someone/piqe", "space", "gradio"),
        ("upload", "someone/piqe", "space", ["README.md", "app.py", "piqe.py", "requirements.txt"]),
        ("create", f"someone/{SENSITIVITY}", "space", "gradio"),
        ("upload", f"someone/{SENSITIVITY}", "space", ["README.md", "app.py", f"{SENSITIVITY}.py", "requirements.txt"]),
    ]


def test_widget_apps_build_and_score(tmp_path, monkeypatch):
    """The Spaces' app.py: built (not launched) and their functions run, as on the Hub."""
    pytest.importorskip("gradio")
    import importlib.util

    import numpy as np
    from PIL import Image

    def load_app(name):
        folder = tmp_path / name
        shutil.copytree(REPO / "metrics" / name, folder)
        spec = importlib.util.spec_from_file_location(f"app_{name}", folder / "app.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    app = load_app("piqe")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (128, 160, 3), dtype=np.uint8)).save(tmp_path / "a.png")
    rows, summary = app.score([str(tmp_path / "a.png")])
    assert rows[0][0] == "a.png" and isinstance(rows[0][1], float) and summary.startswith("piqe: mean")

    sens = load_app(SENSITIVITY)
    overall, per_chain = sens.judge(sens.EXAMPLE, lower_better=False)
    assert overall["n_chains"] == 2 and overall["n_failed"] == 1 and list(per_chain["passed"]) == [True, False]


@pytest.mark.integration
def test_wheel_and_clone_write_identical_cards(built, tmp_path):
    """The metric cards quote measurements (native agreement, flat regime) that the library
    reads as package data: the unpacked wheel, imported from outside the repository, renders
    every card as the clone does."""
    from banana100.metrics.hub.cards import card_metrics, render_metric_card

    unpacked = tmp_path / "wheel"
    zipfile.ZipFile(built["wheel"]).extractall(unpacked)
    names = card_metrics(REPO / "metrics")
    # as a wheel install would: without the editable install's finder, which setup.sh puts first
    # in sys.meta_path (against the namespace-package trap), so that PYTHONPATH decides
    code = ("import sys\n"
            "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '__module__', '').startswith("
            "'__editable___banana100')]\n"
            "import json, banana100\n"
            "from banana100.metrics.hub.cards import render_metric_card\n"
            f"print(json.dumps([banana100.__file__, {{n: render_metric_card(n) for n in {names!r}}}]))")
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    where, cards = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(where).is_relative_to(unpacked), where
    assert sorted(names) == sorted((*ROSTER, *DETECTORS))  # the detector's card reads package data too
    assert cards == {n: render_metric_card(n) for n in names}
    # the measurements themselves reached the cards (not an empty fallback on both sides)
    assert "flat_share" in cards["brisque"] and "python -m bench.metrics.native_agreement" in cards["brisque"]


# -- the built wheel, installed into a fresh venv outside the repository -----------------------


@pytest.mark.integration
def test_wheel_installs_into_a_fresh_venv_and_works(built, tmp_path):
    """pip installs banana100 from a staged requirements.txt that points at the built wheel; the
    heavy dependencies (torch, datasets, ...) come from this test's own environment through a
    .pth file, so nothing is downloaded or reinstalled. Then, from outside the repository:
    --version, the demo, evaluate.load of copied metric folders, a publish dry run, and the
    missing-extra message."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # space/requirements.txt's line, pointed at the same wheel, resolves too (its extra's packages
    # are this environment's business, hence --no-deps)
    space_req = tmp_path / "space-requirements.txt"
    space_req.write_text(space_requirements(built["wheel"].as_uri()))
    dry = subprocess.run([str(py), "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "-r", str(space_req)],
                         capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0 and "Would install banana100-" in dry.stdout, dry.stdout + dry.stderr
    stage = tmp_path / "stage"
    [(_, niqe_dir)] = stage_metric_folders(stage, ["niqe"], source=built["wheel"].as_uri(), metrics_dir=REPO / "metrics")
    pip = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-r",
                          str(niqe_dir / "requirements.txt")], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    site = next((venv / "lib").glob("python3*/site-packages"))
    # after the install, so pip never saw (or tried to replace) the development install
    here = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "torch").is_dir())
    (site / "zz_dependencies_from_the_test_env.pth").write_text(here + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BANANA100_WEIGHTS")}
    if (IQA_PARAMS / "niqe_modelparameters.mat").is_file():
        env["BANANA100_WEIGHTS"] = str(IQA_PARAMS)

    def run(*args, code=None):
        cmd = [str(py), "-c", code] if code else [str(venv / "bin" / "banana100"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)

    where = run(code="import banana100, banana100.metrics.hub.publish as p; print(banana100.__file__); print(p.metrics_root());"
                     " print(banana100.metric_path('PIQE'))")
    assert where.returncode == 0, where.stderr
    module_file, metrics_dir, piqe_dir = where.stdout.split()
    assert piqe_dir == str(Path(metrics_dir) / "piqe")  # the README's evaluate.load(metric_path(...))
    assert Path(module_file).is_relative_to(venv) and Path(metrics_dir).is_relative_to(venv), where.stdout
    assert not Path(module_file).is_relative_to(REPO)

    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith(f"banana100 {__version__}")

    demo = run("demo", "--out", str(tmp_path / "demo"), "--steps", "20", "--chains", "1", "--metrics", "piqe")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "| piqe | lower better | 1 |" in (tmp_path / "demo" / "report" / "report.md").read_text()

    # the installed wheel's own metric folders, copied elsewhere, load with evaluate
    shutil.copytree(Path(metrics_dir) / "piqe", tmp_path / "copied" / "piqe")
    shutil.copytree(Path(metrics_dir) / SENSITIVITY, tmp_path / "copied" / SENSITIVITY)
    image = next((tmp_path / "demo").rglob("step_001.png"))
    code = (
        "import evaluate, banana100\n"
        f"m = evaluate.load({str(tmp_path / 'copied' / 'piqe')!r})\n"
        f"out = m.compute(images=[{str(image)!r}], device='cpu')\n"
        f"p = evaluate.load({str(tmp_path / 'copied' / SENSITIVITY)!r})\n"
        "r = p.compute(scores=[3.0, 2.0, 1.0, 0.5], steps=[1, 5, 10, 20], chain_ids=['a'] * 4, lower_better=False)\n"
        "print(out['metric'], len(out['scores']), r['n_passed'], banana100.__file__)\n"
    )
    loaded = run(code=code)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    metric, n, passed, file = loaded.stdout.split()
    assert (metric, n, passed) == ("piqe", "1", "1") and Path(file).is_relative_to(venv)

    plan = run("publish-metrics", "--org", "someone", "--dry-run", "--stage", str(tmp_path / "plan"))
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert (tmp_path / "plan" / "qalign" / "requirements.txt").is_file()

    # a deep metric without the deep extra (pyiqa hidden): one line naming the extra, exit 2
    missing = run(code=("import sys; sys.modules['pyiqa'] = None\nfrom banana100.cli import main\n"
                        f"sys.exit(main(['score', {str(tmp_path / 'demo' / 'run')!r}, '--metrics', 'topiq_nr', "
                        f"'--out', {str(tmp_path / 's.parquet')!r}]))"))
    assert missing.returncode == 2, missing.stderr[-3000:]
    assert "needs the 'deep' extra" in missing.stderr and "Traceback" not in missing.stderr
