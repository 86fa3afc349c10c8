"""The metric resolver (banana100.metrics.resolve): the table, the evaluators, pyiqa:<id> and a
user's own evaluate module, as `banana100 score` / `demo` / `report` see them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from banana100.errors import UnknownMetricError
from banana100.metrics import resolve as rs
from banana100.testing.runfolder import make_run_folder
from banana100.testing.usermodules import BRIGHTNESS
from banana100.testing.usermodules import write_module

@pytest.fixture(autouse=True)
def _fresh():
    rs.clear_cache()
    yield
    rs.clear_cache()


def test_table_and_evaluators():
    r = rs.resolve("niqe")
    assert (r.kind, r.lower_better, r.display_name) == ("table", True, "NIQE")
    assert rs.resolve("visualquality_r1").kind == "evaluator"
    assert rs.parse_metrics("all") == list(rs.ROSTER) and len(rs.ROSTER) == 21


def test_rali_says_what_is_missing_in_one_line():
    with pytest.raises(UnknownMetricError) as info:
        rs.resolve("rali")
    text = str(info.value)
    assert "unavailable" in text and "inference code" in text and "\n" not in text


def test_unknown_name_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownMetricError, match="not in the metric table") as info:
        rs.resolve("nosuchmetric")
    assert "\n" not in str(info.value)
    with pytest.raises(UnknownMetricError):
        rs.resolve("./missing_folder")


@pytest.mark.integration  # module processes or evaluate's Hub probe (~10 s)
def test_users_module_folder(tmp_path):
    folder = write_module(tmp_path, "brightness", BRIGHTNESS.replace("LOWER", "False"))
    r = rs.resolve(str(folder))
    assert (r.kind, r.lower_better, r.display_name, r.name) == ("module", False, "brightness", str(folder))
    scorer = rs.make_scorer(str(folder))
    import numpy as np

    assert scorer.score_arrays([np.full((8, 8, 3), 10, np.uint8), np.full((8, 8, 3), 200, np.uint8)]) == [10.0, 200.0]
    assert rs.label(str(folder)) == str(folder)  # the name as written, wherever it shows
    # the direction comes from the module
    rs.clear_cache()
    lower = write_module(tmp_path, "darkness", BRIGHTNESS.replace("LOWER", "True").replace("Brightness", "Darkness"))
    assert rs.resolve(str(lower)).lower_better is True


# each case loads a module in a process of its own (~5 s): two stay in the fast tier, the rest run in the
# integration tier (CI runs both)
SLOW_MODULE = pytest.mark.integration


@pytest.mark.parametrize("body, why", [
    ("return [1.0] * len(images)", "not a dict"),
    ("return {'scores': [1.0] * len(images)}", "'scores' and 'lower_better'"),
    pytest.param("return {'scores': [], 'lower_better': False}", "one number per image", marks=SLOW_MODULE),
    pytest.param("return {'scores': [1.0] * len(images), 'lower_better': 'no'}", "not True or False", marks=SLOW_MODULE),
    pytest.param("raise RuntimeError('model file missing')", "model file missing", marks=SLOW_MODULE),
    # True is not a score of 1.0; a module calling sys.exit() is an error naming it, never a silent exit
    pytest.param("return {'scores': [True] * len(images), 'lower_better': False}", r"'scores'\[0\] is True \(bool\)", marks=SLOW_MODULE),
    pytest.param("return {'scores': np.array([False] * len(images)), 'lower_better': False}", r"'scores'\[0\] is .*bool", marks=SLOW_MODULE),
    pytest.param("return {'scores': ['1.0'] * len(images), 'lower_better': False}", r"'scores'\[0\] is '1.0' \(str\)", marks=SLOW_MODULE),
    pytest.param("import sys; sys.exit(0)", r"compute\(images=\[a 256x256 RGB image\]\) called sys.exit\(0\)", marks=SLOW_MODULE),
])
def test_module_breaking_the_contract(tmp_path, body, why):
    src = BRIGHTNESS.replace(
        '''        scores = [float(np.asarray(im, dtype=np.float64).mean()) for im in images]
        return {"metric": "brightness", "scores": scores, "mean": float(np.mean(scores)), "lower_better": LOWER}''',
        "        " + body)
    folder = write_module(tmp_path, "broken", src)
    with pytest.raises(UnknownMetricError, match=why) as info:
        rs.resolve(str(folder))
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


@pytest.mark.integration  # evaluate's module loader (~7 s)
def test_folder_that_is_not_a_module(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnknownMetricError, match="could not load it as an evaluate module"):
        rs.resolve(str(tmp_path / "empty"))


def test_pyiqa_ids():
    pytest.importorskip("pyiqa")
    r = rs.resolve("pyiqa:niqe_matlab")
    assert (r.kind, r.lower_better, r.name) == ("pyiqa", True, "pyiqa:niqe_matlab")
    ava = rs.resolve("pyiqa:musiq-ava")
    assert ava.lower_better is False and ava.spec.score_range == (1.0, 10.0)
    assert rs.resolve("pyiqa:niqe").kind == "table"  # the table's own metric, pyiqa backend
    for name, why in [("pyiqa:psnr", "full-reference"), ("pyiqa:fid", "not a per-image"),
                      ("pyiqa:nosuch", "has no metric")]:
        rs.clear_cache()
        with pytest.raises(UnknownMetricError, match=why):
            rs.resolve(name)


def test_every_pyiqa_nr_metric_resolves_or_says_why():
    pyiqa = pytest.importorskip("pyiqa")
    for pid in pyiqa.list_models(metric_mode="NR"):
        try:
            r = rs.resolve(f"pyiqa:{pid}")
        except UnknownMetricError as e:
            assert pid in rs.NOT_PER_IMAGE, e
        else:
            assert isinstance(r.lower_better, bool)


@pytest.mark.integration  # three CLI processes (~40 s on 2 loaded cores)
def test_score_cli_with_own_metric(tmp_path):
    """`banana100 score --metrics piqe,<folder>` and `report` on the result, through the CLI."""
    run = tmp_path / "run"
    make_run_folder(run, sources=("a",), steps=20, size=(96, 96))
    folder = write_module(tmp_path, "brightness", BRIGHTNESS.replace("LOWER", "False"))
    out = tmp_path / "scores.parquet"
    cli = [sys.executable, "-m", "banana100"]
    subprocess.run(cli + ["score", str(run), "--metrics", f"piqe,{folder}", "--out", str(out), "--device", "cpu"],
                   check=True, capture_output=True)
    df = pd.read_parquet(out)
    assert set(df["metric"]) == {"piqe", str(folder)}
    mine = df[df["metric"] == str(folder)]
    assert len(mine) == 21 and mine["error"].isna().all() and not mine["lower_better"].any()
    res = subprocess.run(cli + ["report", str(out), "--out", str(tmp_path / "rep")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert f"**{folder}** saw the damage" in (tmp_path / "rep" / "report.md").read_text()  # one label
    bad = subprocess.run(cli + ["score", str(run), "--metrics", "piqe,rali", "--out", str(tmp_path / "x.parquet")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "rali: unavailable" in bad.stderr


@pytest.mark.integration
def test_pyiqa_metric_outside_the_table_scores(tmp_path):
    """pyiqa:entropy (no weights) scored live by pyiqa through the engine."""
    pytest.importorskip("pyiqa")
    from banana100.scoring import score_to_parquet

    run = tmp_path / "run"
    make_run_folder(run, sources=("a",), steps=5, size=(64, 64))
    out = score_to_parquet(run, ["pyiqa:entropy"], tmp_path / "s.parquet", device="cpu", progress=False)
    df = pd.read_parquet(out)
    assert len(df) == 6 and df["error"].isna().all() and (df["metric"] == "pyiqa:entropy").all()
    assert df["score"].between(0, 8).all()



@pytest.mark.integration  # module processes or evaluate's Hub probe (~10 s)
def test_module_exiting_on_import_or_later_is_an_error_naming_it(tmp_path):
    import numpy as np

    from banana100.errors import Banana100Error

    on_import = write_module(tmp_path, "leaves", "import sys\nsys.exit(0)\n" + BRIGHTNESS.replace("LOWER", "False"))
    with pytest.raises(UnknownMetricError, match=r"leaves: loading it called sys.exit\(0\)"):
        rs.resolve(str(on_import))
    # passes the probe (one image), exits on a real batch of two
    later = write_module(tmp_path, "later", BRIGHTNESS.replace("LOWER", "False").replace(
        "        scores = [", "        if len(images) > 1:\n            raise SystemExit(3)\n        scores = ["))
    scorer = rs.make_scorer(str(later))
    with pytest.raises(Banana100Error, match=r"later: compute\(\) called sys.exit\(3\)"):
        scorer.score_arrays([np.full((8, 8, 3), 10, np.uint8)] * 2)


@pytest.mark.integration  # a module process (~6 s)
def test_score_cli_with_a_module_that_exits(tmp_path, capsys):
    from banana100.cli import main

    images = tmp_path / "imgs"
    images.mkdir()
    from PIL import Image
    import numpy as np

    Image.fromarray(np.full((32, 32, 3), 100, np.uint8)).save(images / "a.png")
    folder = write_module(tmp_path, "quits", "import sys\nsys.exit(0)\n")
    status = main(["score", str(images), "--metrics", str(folder), "--out", str(tmp_path / "s.parquet")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "quits: loading it called sys.exit(0)" in err


@pytest.mark.integration  # module processes or evaluate's Hub probe (~10 s)
def test_a_hub_id_while_offline_could_not_be_reached(monkeypatch):
    """Offline, a Hub id is "could not be reached", not "doesn't exist" (evaluate's words)."""
    with pytest.raises(UnknownMetricError, match=r"someone/no-such-metric: the Hub could not be reached "
                                                  r"\(HF_HUB_OFFLINE=1\)") as info:
        rs.resolve("someone/no-such-metric")
    assert "doesn't exist" not in str(info.value) and "\n" not in str(info.value)
    # no HF_HUB_OFFLINE, but the quick probe finds no network
    from huggingface_hub import constants

    from banana100.metrics import weights

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(weights, "hub_unreachable", lambda *a, **k: "download skipped: cannot reach huggingface.co:443")
    rs.clear_cache()
    with pytest.raises(UnknownMetricError, match="could not be reached .download skipped: cannot reach huggingface"):
        rs.resolve("someone/no-such-metric")


@pytest.mark.integration  # imports pyiqa's archs (~20 s on 2 loaded cores)
def test_an_offline_pyiqa_metric_says_so_without_trying_the_network(monkeypatch, tmp_path):
    """pyiqa:<id> whose weights are not cached, offline: its line at once (it spent ~55 s in
    download retries first), naming the offline state; no host name is even looked up."""
    pytest.importorskip("pyiqa")
    import socket

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # nothing cached
    looked_up = []

    def no_dns(host, *args, **kwargs):
        looked_up.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    from banana100.errors import WeightsNotFoundError

    with pytest.raises(WeightsNotFoundError, match=r"missing files: pyiqa:musiq-ava: musiq_ava_ckpt-e8d3f067.pth \(from "
                                                   r"https://.*cannot happen now \(HF_HUB_OFFLINE=1\)") as info:
        rs.make_scorer("pyiqa:musiq-ava", device="cpu")
    assert "\n" not in str(info.value) and looked_up == []
    import torch.hub
    from huggingface_hub import constants

    assert torch.hub.download_url_to_file.__name__ == "download_url_to_file" and constants.HF_HUB_OFFLINE


@pytest.mark.integration  # imports pyiqa's archs (~20 s on 2 loaded cores)
def test_an_offline_pyiqa_metric_is_not_ready_without_its_weights(monkeypatch, tmp_path, capsys):
    """Issue 44 item 12: offline, the preflight said "ready: pyiqa:musiq-ava"; the run then printed a stray
    `Downloading: "https://..."` line and exited 2 (usage), where a missing file is 1. Now the preflight
    builds it, names the missing file, and nothing is scored; a pyiqa metric without weights stays ready."""
    pytest.importorskip("pyiqa")
    import numpy as np
    from PIL import Image

    from banana100.cli import main

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # nothing cached
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (128, 128, 3), np.uint8)).save(tmp_path / "a.png")
    out = tmp_path / "s.parquet"
    assert main(["score", str(tmp_path / "a.png"), "--metrics", "pyiqa:musiq-ava,piqe", "--out", str(out),
                 "--device", "cpu"]) == 1
    got = capsys.readouterr()
    assert "Downloading" not in got.out + got.err and got.out == "" and not out.exists()
    assert got.err.strip().splitlines() == [
        "banana100 score: error: missing files: pyiqa:musiq-ava: musiq_ava_ckpt-e8d3f067.pth (pyiqa reads them from "
        f"{tmp_path / 'torch' / 'hub' / 'pyiqa'} and downloads them itself: run it once where there is internet); "
        "ready: piqe"]
    assert main(["score", str(tmp_path / "a.png"), "--metrics", "pyiqa:entropy", "--out", str(out),
                 "--device", "cpu"]) == 0  # needs no file: ready, and scored


def test_names_in_any_case_and_a_did_you_mean_for_near_misses():
    assert rs.parse_metrics("NIQE,Piqe,TOPIQ_NR") == ["niqe", "piqe", "topiq_nr"]
    assert rs.resolve("VisualQuality_R1").name == "visualquality_r1"
    with pytest.raises(UnknownMetricError, match=r"unknown metric 'nqie'; did you mean 'niqe'\?"):
        rs.resolve("nqie")
    with pytest.raises(UnknownMetricError) as info:
        rs.resolve("xyzzy")  # nothing close: no suggestion
    assert "did you mean" not in str(info.value)
    from banana100.metrics.table import get_metric

    assert get_metric("BRISQUE").name == "brisque"
    with pytest.raises(UnknownMetricError, match="did you mean 'brisque'"):
        get_metric("brisqe")


def test_a_module_has_one_label_everywhere(tmp_path, monkeypatch):
    """Issue 44 item 18: the same module was `./shine` in the scores file and in score's table, and
    `brightness` (its "metric" output) in the report, or `shine` once its folder was gone. Its label is
    what the user wrote, resolved or not, present or gone; the module is not run again to name it."""
    monkeypatch.chdir(tmp_path)
    write_module(tmp_path, "shine", BRIGHTNESS.replace("LOWER", "False"))  # its "metric" is brightness
    assert rs.label("./shine") == "./shine"  # nothing resolved yet in this process
    assert rs.resolve("./shine").display_name == "brightness" and rs.label("./shine") == "./shine"  # resolved
    rs.clear_cache()
    assert rs.label("./gone_module") == "./gone_module"
    assert rs.label("pyiqa:musiq-ava") == "pyiqa:musiq-ava" and rs.label("niqe") == "NIQE"


OWN_METRIC_DOC = Path(__file__).resolve().parents[2] / "docs" / "own-metric.md"


def test_the_documented_minimal_module_scores_paths_pil_images_and_arrays(tmp_path):
    import re

    import numpy as np
    from PIL import Image

    code = re.search(r"A minimal module \(`my_metric/my_metric.py`\):\s*```python\n(.*?)```", OWN_METRIC_DOC.read_text(),
                     re.S).group(1)
    folder = write_module(tmp_path, "my_metric", code)
    img = np.full((32, 32, 3), 100, np.uint8)
    Image.fromarray(img).save(tmp_path / "a.png")
    r = rs.resolve(str(folder))
    assert r.kind == "module" and r.display_name == "brightness"
    assert r.module.compute(images=[str(tmp_path / "a.png"), Image.fromarray(img), img])["scores"] == [100.0] * 3
    assert rs.make_scorer(str(folder)).score([tmp_path / "a.png"]) == [100.0]  # the path read by banana100


def test_pyiqa_ids_in_any_case():
    pytest.importorskip("pyiqa")
    assert rs.resolve("PYIQA:MUSIQ-AVA").name == "pyiqa:musiq-ava"
    assert rs.resolve("pyiqa:NIQE").name == "niqe"  # the table's metric, pyiqa backend
    with pytest.raises(UnknownMetricError, match="did you mean 'musiq'"):
        rs.resolve("pyiqa:musiqq")


# Issue 44 item 9: what a user's module can do that no `except` catches. Each passes the probe (one image) and
# misbehaves on its sixth call: the first batch of the second chunk (32 images a chunk, 8 a batch). The first
# chunk's rows must survive (a stopped run loses at most the chunk it was in), with one line naming the module.
_MISBEHAVES = {
    "os_exit": "import os; os._exit(0)",
    "base_exception": "raise BaseException('mine')",
    "never_returns": "import time; time.sleep(3600)",
}


def _misbehaving(tmp_path, name: str, action: str) -> Path:
    body = BRIGHTNESS.replace("LOWER", "False").replace("import numpy as np\n", "import numpy as np\nCALLS = []\n")
    body = body.replace("        scores = [",
                        f"        CALLS.append(1)\n        if len(CALLS) == 6:\n            {action}\n        scores = [")
    return write_module(tmp_path, name, body)


def _images(tmp_path, n=40):
    import numpy as np
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    for k in range(n):
        Image.fromarray(np.full((32, 32, 3), 5 * k, np.uint8)).save(folder / f"{k:02d}.png")
    return folder


@pytest.mark.integration  # a module process per case (~10 s each on 2 loaded cores)
@pytest.mark.parametrize("what", sorted(_MISBEHAVES))
def test_a_module_that_exits_raises_a_base_exception_or_hangs_stops_the_run_keeping_what_was_scored(
        tmp_path, capsys, what):
    from banana100.cli import main

    folder = _misbehaving(tmp_path, what, _MISBEHAVES[what])
    out = tmp_path / "s.parquet"
    args = ["score", str(_images(tmp_path)), "--metrics", str(folder), "--out", str(out), "--batch-size", "8",
            "--timeout-per-batch", "20"]
    status = main(args)
    err = [line for line in capsys.readouterr().err.splitlines() if "%|" not in line and line.strip()]
    assert status == 1 and len(err) == 1, err
    said = {"os_exit": "its process ended during compute() (exit status 0: os._exit()",
            "base_exception": "compute() raised BaseException: mine (a BaseException",
            "never_returns": "compute() did not return within 20 s (--timeout-per-batch)"}[what]
    assert err[0].startswith(f"banana100 score: error: {folder}: {said}") and "scored before are kept" in err[0]
    kept = pd.read_parquet(out)
    assert len(kept) == 32 and kept["error"].isna().all()  # the first chunk, merged into --out
    rs.clear_cache()
    fixed = write_module(tmp_path, f"{what}_fixed", BRIGHTNESS.replace("LOWER", "False"))
    assert main([*args[:3], str(fixed), *args[4:]]) == 0  # another module into the same file: no harm left


@pytest.mark.integration
def test_a_module_that_changes_the_current_folder_changes_nothing_for_score(tmp_path, capsys, monkeypatch):
    """os.chdir('/') in compute gave "SB: no such file or folder" after everything was scored, and nothing was
    written: the module's current folder is its own now."""
    from banana100.cli import main

    monkeypatch.chdir(tmp_path)
    folder = write_module(tmp_path, "wanders", BRIGHTNESS.replace("LOWER", "False").replace(
        "        scores = [", "        import os\n        os.chdir('/')\n        scores = ["))
    _images(tmp_path)
    assert main(["score", "imgs", "--metrics", "./wanders", "--out", "SB.parquet", "--batch-size", "8"]) == 0
    assert len(pd.read_parquet(tmp_path / "SB.parquet")) == 40 and folder.is_dir()
