"""The Gradio Space (`space/app.py`), launched for real on local ports:

- with no data configured (so it builds its tiny simulated demo set on first start), driven with
  `gradio_client` (every endpoint, real inputs, bad inputs) and with headless Chromium (first
  load, the slider, both tabs);
- as on the Hub (SPACE_ID set), its Hub a local HTTP stand-in (`tests/fixtures/hubstandin.py`) serving a
  stand-in of the original release laid out as its repository (`banana100/testing/releasetools.py`): chains
  fetched and scored on demand, the "why it fails" view, and a screenshot of the Explore tab.

Screenshots are kept in $BANANA100_TEST_ARTEFACTS or the pytest tmp folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

gradio_client = pytest.importorskip("gradio_client", reason="the Space tests need `pip install -e .[dev]`")
pytest.importorskip("gradio", reason="the Space tests need `pip install -e .[dev]`")

from fixtures.spacetools import browser_page, launched_app, wait_first_load  # noqa: E402

# the Space as a server process, driven by gradio_client and a real browser
pytestmark = pytest.mark.integration

DEMO = "2x20x128"  # 2 chains x 20 steps, generated sources 128 px wide: the demo set builds in seconds


def _demo_env(work: Path) -> dict[str, str]:
    return {
        "BANANA100_SPACE_CACHE": str(work / "cache"),
        "BANANA100_SPACE_DEMO": DEMO,
        "BANANA100_SPACE_DEMO_METRICS": "piqe",
        "BANANA100_SPACE_DATASET": "",
        "BANANA100_SPACE_SCORES": "",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    work = tmp_path_factory.mktemp("space")
    with launched_app(work, _demo_env(work)) as (url, netlog, log):
        yield {"url": url, "netlog": netlog, "log": log, "cache": work / "cache", "env": _demo_env(work)}


@pytest.fixture(scope="module")
def app_module(space):
    """`space/app.py` imported in this process, on the demo set the launched app built."""
    import importlib.util

    from fixtures.spacetools import APP

    with pytest.MonkeyPatch.context() as mp:
        for name, value in space["env"].items():
            mp.setenv(name, value)
        mp.delenv("SPACE_ID", raising=False)
        mp.delenv("BANANA100_SPACE_RELEASE", raising=False)
        spec = importlib.util.spec_from_file_location("banana100_space_app", APP)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


@pytest.fixture(scope="module")
def client(space):
    return gradio_client.Client(space["url"], verbose=False)


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory) -> Path:
    folder = os.environ.get("BANANA100_TEST_ARTEFACTS")
    out = Path(folder) / "space" if folder else tmp_path_factory.mktemp("space-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _demo_explorer(space):
    from banana100.explore import Explorer

    root = next(space["cache"].glob("demo-*"))
    return Explorer.open(root / "dataset", root / "scores.parquet")


def _rgb(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float32)


def test_first_start_builds_demo_set_offline(space):
    log = space["log"].read_text()
    assert "space: building a demo set" in log and "space: built the demo set" in log
    assert all(f"space: {k}/4 " in log for k in range(1, 5))  # the cold start shows each stage
    assert list(space["cache"].glob("demo-*/DONE")), "the demo set was not finished"
    assert space["netlog"].read_text() == "", f"the app tried to reach the network: {space['netlog'].read_text()}"


def test_show_chain_endpoint(client, space):
    ex = _demo_explorer(space)
    chain = ex.info(ex.chain_ids()[0])
    slider, src, img, plot, verdicts, summary, line = client.predict(chain.source_id, chain.setting, chain.repeat,
                                                                     20, api_name="/show_chain")
    assert summary["data"][0][0] == "PIQE" and "over all chains" in line
    assert slider["value"] == 20 and slider["maximum"] == 20
    source_shown, step_shown = _rgb(src), _rgb(img)
    assert source_shown.shape[:2] == np.asarray(ex.image(chain.chain_id, 0)).shape[:2]
    # what is shown is that chain's image (the page sends a compressed copy: compare loosely)
    assert np.abs(source_shown - np.asarray(ex.image(chain.chain_id, 0), np.float32)).mean() < 8
    shown_error = np.abs(step_shown - np.asarray(ex.image(chain.chain_id, 20), np.float32)).mean()
    assert shown_error < 8
    assert np.abs(step_shown - source_shown).mean() > max(5, 2 * shown_error)  # step 20 is visibly damaged
    assert plot and plot.get("type") == "matplotlib"
    rows = verdicts["data"]
    assert [r[0] for r in rows] == ["PIQE"]
    assert rows[0][2] in ("pass (saw it)", "FAIL (missed it)")
    assert verdicts["headers"][:3] == ["metric", "direction", "verdict"] and "d5" in verdicts["headers"]


def test_show_step_endpoint_follows_the_slider(client, space):
    ex = _demo_explorer(space)
    chain = ex.info(ex.chain_ids()[1])
    shown = {}
    for step in (0, 5, 20):
        img, plot = client.predict(chain.source_id, chain.setting, chain.repeat, step, api_name="/show_step")
        shown[step] = _rgb(img)
        assert np.abs(shown[step] - np.asarray(ex.image(chain.chain_id, step), np.float32)).mean() < 8
        assert plot.get("type") == "matplotlib"
    assert np.abs(shown[20] - shown[0]).mean() > np.abs(shown[5] - shown[0]).mean()


def test_show_step_refuses_unknown_chain(client):
    # refused before any app code runs: the value is not one of the dropdown's choices
    with pytest.raises(Exception, match="not in the list of choices"):
        client.predict("../../etc/passwd", "replicate", 0, 3, api_name="/show_step")


def test_leaderboard_endpoint(client):
    """The Leaderboard tab's table and heatmap of the demo set's scores."""
    table, heatmap = client.predict(api_name="/leaderboard")
    assert table["headers"] == ["metric", "setting", "editor", "chains", "failed", "failure rate", "mean rho"]
    assert "PIQE" in [row[0] for row in table["data"]] and table["data"][0][3] == 2
    assert Image.open(heatmap).format == "PNG"


def _live(client, upload, sample, steps, editor="simulated"):
    job = client.submit(upload, sample, steps, editor, "", api_name="/run_live")
    job.result()
    return job.outputs()


def test_run_live_streams_every_step_from_a_sample(client):
    outputs = _live(client, None, "coffee", 3)
    assert len(outputs) == 4  # steps 0, 1, 2, 3, one update each
    image, gallery, plot, verdicts, status = outputs[-1]
    assert len(gallery) == 4 and [g["caption"] for g in gallery] == ["step 0", "step 1", "step 2", "step 3"]
    assert max(_rgb(image).shape[:2]) == 512  # coffee (400x600) at the Space's working size
    assert plot.get("type") == "matplotlib"
    assert status.startswith("Done: 3 steps") and "Judged at steps 3 against step 1" in status and "run 20 steps" in status
    assert [r[0] for r in verdicts["data"]] == ["PIQE"] and verdicts["data"][0][2] in ("pass (saw it)", "FAIL (missed it)")
    assert verdicts["headers"][3] == "d3"  # a three-step chain is judged at its last step
    assert "Step 1 of 3" in outputs[1][4]


def test_run_live_never_rewrites_a_file_it_handed_out(app_module):
    # Gradio reads a yielded file while the next step runs; rewriting it (as re-yielding the same
    # thumbnail arrays did) let readers see an empty file. Each file is written once, kept while
    # the chain streams, and removed when it ends.
    handed_out = {}
    for image, gallery, *_ in app_module.run_live(None, "coffee", 3, "simulated", ""):
        for path in [image] + [item[0] for item in gallery]:
            assert isinstance(path, str), f"yielded {type(path).__name__}, not a file written once"
            stat = os.stat(path)
            assert handed_out.setdefault(path, (stat.st_ino, stat.st_mtime_ns)) == (stat.st_ino, stat.st_mtime_ns), \
                f"{path} was rewritten after it was handed out"
    assert len(handed_out) == 8  # steps 0-3: the copy and its thumbnail
    assert not any(os.path.exists(p) for p in handed_out)


def test_run_live_from_an_upload(client, tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.png"
    Image.fromarray(rng.integers(0, 255, (100, 120, 3), dtype=np.uint8)).save(path)  # over PIQE's 96 px
    outputs = _live(client, gradio_client.handle_file(str(path)), None, 2)
    first = _rgb(outputs[0][0])
    assert first.shape[:2] == (100, 120)
    assert len(outputs[-1][1]) == 3


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_text("not an image at all"), "image"),
        (lambda p: Image.new("RGB", (5000, 4000), "white").save(p, format="PNG"), "megapixels"),
        (lambda p: Image.new("RGB", (90, 200), "white").save(p, format="PNG"), "at least 96 pixels"),
    ],
    ids=["not-an-image", "too-many-pixels", "too-small"],
)
def test_run_live_refuses_bad_uploads(client, tmp_path, make, message):
    path = tmp_path / "upload.png"
    make(path)
    with pytest.raises(Exception, match=message):
        _live(client, gradio_client.handle_file(str(path)), None, 2)


def test_run_live_refuses_too_large_file(client, tmp_path):
    path = tmp_path / "big.png"
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 255, (2000, 2000, 3), dtype=np.uint8)).save(path)  # ~12 MB, 4 MP
    assert path.stat().st_size > 10 * 1024**2
    with pytest.raises(Exception, match=r"(?i)(10 ?MB|too large|file size)"):
        _live(client, gradio_client.handle_file(str(path)), None, 2)


@pytest.mark.parametrize("steps, sample, editor, message", [
    # gradio checks ranges and choices before the app's own checks (which say the same)
    (31, "coffee", "simulated", "greater than maximum value 30|between 1 and 30"),
    (0, "coffee", "simulated", "less than minimum value 1|between 1 and 30"),
    (2, "../../../etc/passwd", "simulated", "not in the list of choices|unknown sample"),
    (2, "coffee", "dall-e", "not in the list of choices|choose an editor"),
])
def test_run_live_refuses_bad_parameters(client, steps, sample, editor, message):
    with pytest.raises(Exception, match=message):
        _live(client, None, sample, steps, editor)


def test_gemini_needs_the_users_own_key(client):
    from banana100.chains.editors import EDITORS

    if "gemini" not in EDITORS:
        pytest.skip("no gemini editor in this build")
    with pytest.raises(Exception, match="paste your Gemini API key"):
        _live(client, None, "coffee", 2, "gemini")


def test_page_in_a_real_browser(space, artefacts):
    with browser_page(1280, 1000) as page:
        wait_first_load(page, space["url"])
        note = page.locator("#demo-note").inner_text()
        assert note.startswith("Simulated demo set") and "PIQE missed the damage in" in note and "34.1" in note
        slider = page.locator("#step input[type=range]")
        assert slider.input_value() == "20"
        assert page.locator("#step input[type=number]").input_value() == "20"
        before = page.locator("#step-image img").get_attribute("src")
        plot_before = page.locator("#curves img").get_attribute("src")
        verdict_text = page.locator("#verdicts").inner_text()
        assert "PIQE" in verdict_text and ("pass" in verdict_text or "FAIL" in verdict_text)
        assert "failure rate" in page.locator("#summary").inner_text()

        slider.fill("5")  # move the slider: the step image and the plot's marker follow
        page.wait_for_function(
            "(b) => { const i = document.querySelector('#step-image img'); return i && i.src !== b; }",
            arg=before, timeout=30_000)
        page.wait_for_function(
            "(b) => { const i = document.querySelector('#curves img'); return i && i.src !== b; }",
            arg=plot_before, timeout=30_000)
        assert page.locator("#step input[type=number]").input_value() == "5"
        page.screenshot(path=str(artefacts / "explore.png"), full_page=True)

        page.get_by_role("tab", name="Try it").click()
        page.locator("#live-steps input[type=number]").fill("4")
        page.locator("#live-steps input[type=number]").press("Enter")
        page.locator("#run").click()
        page.wait_for_function(
            "() => (document.querySelector('#live-status')?.innerText || '').includes('Done: 4 steps')",
            timeout=60_000)
        assert page.locator("#live-image img").count() == 1
        # every step's thumbnail is shown (loaded, not a broken image)
        page.wait_for_function(
            """() => { const imgs = [...document.querySelectorAll('#live-gallery img')];
                       return imgs.length >= 5 && imgs.every(i => i.complete && i.naturalWidth > 0); }""",
            timeout=30_000)
        page.screenshot(path=str(artefacts / "try-it.png"), full_page=True)
    print(f"screenshots: {artefacts}")
    assert (artefacts / "explore.png").stat().st_size > 10_000


# -- on a stand-in of the original release, as on the Hub --------------------------------------


@pytest.fixture(scope="module")
def release_space(tmp_path_factory):
    """The Space as on the Hub (SPACE_ID set, nothing else configured), its Hub being a local
    stand-in (`tests/fixtures/hubstandin.py`) that serves `kenantang/Banana100` from a stand-in of the
    release: the real `huggingface_hub` client path, offline."""
    from fixtures.hubstandin import serve_hub
    from banana100.testing.releasetools import make_release_standin

    work = tmp_path_factory.mktemp("space-release")
    standin = make_release_standin(work / "kenantang-Banana100", sources=("dunes", "skyline"), repeats=2,
                                   steps=20, side=256)
    with serve_hub({"kenantang/Banana100": standin}) as hub:
        env = {
            "SPACE_ID": "someone/banana100",  # what the Hub sets: show the original release
            "HF_ENDPOINT": str(hub),
            "HF_HUB_OFFLINE": "0",
            "BANANA100_SPACE_CACHE": str(work / "cache"),
            "BANANA100_SPACE_METRICS": "piqe",
            "BANANA100_SPACE_DATASET": "",
            "BANANA100_SPACE_RELEASE": "",
            "GRADIO_ANALYTICS_ENABLED": "False",
        }
        with launched_app(work, env) as (url, netlog, log):
            yield {"url": url, "netlog": netlog, "log": log, "cache": work / "cache", "standin": standin,
                   "hub": hub}


def test_release_chain_is_fetched_and_scored_on_demand(release_space):
    client = gradio_client.Client(release_space["url"], verbose=False)
    out = client.predict("skyline", "replicate", 1, 20, api_name="/show_chain")
    slider, _src, img, plot, verdicts, summary, line = out
    assert slider["maximum"] == 20 and plot.get("type") == "matplotlib" and summary["data"][0][0] == "PIQE"
    original = _rgb(release_space["standin"] / "replicate/skyline/rep1/img_020.png")
    assert np.abs(_rgb(img) - original).mean() < 8  # the release's own image, shown at full size (256 px)
    assert [r[0] for r in verdicts["data"]] == ["PIQE"] and verdicts["data"][0][2] in ("pass (saw it)",
                                                                                         "FAIL (missed it)")
    assert "scored so far" in line
    cached = list(release_space["cache"].glob("release/*/scores/skyline__replicate__r1/piqe__native.parquet"))
    assert len(cached) == 1  # cached per chain, metric and backend
    crop, residual, mscn, hist, text = client.predict("skyline", "replicate", 1, 10, api_name="/show_why")
    assert _rgb(crop).shape == (192, 192, 3)  # 1:1 crop of the 256x192 image
    assert _rgb(residual).std() > 3 and _rgb(mscn).std() > 3
    assert hist.get("type") == "matplotlib" and "step 10" in text and "step 0 (source)" in text
    assert release_space["netlog"].read_text() == ""  # only the local Hub stand-in was reached
    fetched = {p for m, p in release_space["hub"].requests if "/resolve/" in p}
    prefix = "/datasets/kenantang/Banana100/resolve/main/replicate/"
    assert {p for p in fetched if "/skyline/rep1/" in p} == {f"{prefix}skyline/rep1/img_{k:03d}.png" for k in range(21)}
    assert not [p for p in fetched if "/skyline/rep0/" in p]  # a chain nobody looked at is not downloaded


def test_release_explore_tab_screenshot(release_space, artefacts):
    with browser_page(1280, 1000) as page:
        wait_first_load(page, release_space["url"])
        data_line = page.locator("#data-line").inner_text()
        assert "original release" in data_line and "hf://datasets/kenantang/Banana100" in data_line
        assert "PIQE" in page.locator("#verdicts").inner_text()  # the first chain was scored on load
        page.wait_for_selector("#why-mscn img", timeout=60_000)
        page.wait_for_selector("#why-hist img", timeout=60_000)
        assert "MSCN" in page.locator("#why").inner_text()
        shot = artefacts / "explore-release.png"
        page.screenshot(path=str(shot), full_page=True)
    image = _rgb(shot)
    assert image.shape[1] == 1280 and image.shape[0] > 1500  # the whole tab, why view included
    assert image.std() > 20  # not a blank or error page
    print(f"screenshot: {shot}")


@pytest.fixture(scope="module")
def supplement_app(tmp_path_factory):
    """`space/app.py` imported in this process on a supplement-shaped release (ten-step chains,
    two chat modes, a variant per sequence) and its PIQE scores."""
    import importlib.util

    from fixtures.spacetools import APP

    from banana100 import scoring
    from banana100.chains.importer import import_chains
    from banana100.testing.releasetools import SUPPLEMENT_PATTERN, make_supplement_standin

    work = tmp_path_factory.mktemp("space-supplement")
    run = work / "run"
    import_chains(make_supplement_standin(work / "release"), SUPPLEMENT_PATTERN, run)
    scoring.score_to_parquet(run, ["piqe"], work / "scores.parquet", device="cpu", progress=False)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"BANANA100_SPACE_DATASET": str(run), "BANANA100_SPACE_SCORES": str(work / "scores.parquet"),
                            "BANANA100_SPACE_CACHE": str(work / "cache"), "GRADIO_ANALYTICS_ENABLED": "False"}.items():
            mp.setenv(name, value)
        for name in ("SPACE_ID", "BANANA100_SPACE_RELEASE", "BANANA100_SPACE_CHECK_STEPS"):
            mp.delenv(name, raising=False)
        spec = importlib.util.spec_from_file_location("banana100_space_app_supplement", APP)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


def test_space_picks_supplement_chains_by_variant_and_chat_mode_and_checks_their_steps(supplement_app):
    app = supplement_app
    choices = app._repeats("dunes", "replicate")
    assert len(choices) == 11 and "qwen_edit, same chat, repeat 0" in choices and "qwen_edit, repeat 0" in choices
    assert app.EXPLORER.check_steps == (2, 5, 10)
    assert "d2, d5, d10: its change from step 1 to steps 2, 5, 10 (the paper's: 5, 10, 20" in app.PROTOCOL
    same = app._chain("dunes", "replicate", "qwen_edit, same chat, repeat 0")
    assert same == "dunes__replicate__qwen_edit__same-chat__r0"
    assert app._chain("dunes", "replicate", "qwen_edit, repeat 0") == "dunes__replicate__qwen_edit__r0"
    slider, _src, _img, _fig, verdicts, summary, _line = app.show_chain("dunes", "replicate",
                                                                         "qwen_edit, same chat, repeat 0",
                                                                         progress=lambda *a, **k: None)
    assert slider.maximum == 10
    assert list(verdicts.columns) == ["metric", "direction", "verdict", "d2", "d5", "d10", "rho"]
    assert verdicts.iloc[0]["verdict"] != "incomplete"
    assert summary.iloc[0]["incomplete"] == 0 and summary.iloc[0]["chains"] == 11
    board = app.EXPLORER.leaderboard()
    assert {"chat_mode", "variant"} <= set(board.columns) and set(board["chat_mode"]) == {"different", "same"}
