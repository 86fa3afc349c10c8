"""Banana100 Space: watch an image fall apart while the metrics look away.

A thin Gradio face over `banana100.explore`. What the Explore tab shows:

- the original Banana100 release (`explore.ORIGINAL_RELEASE`: the Hub dataset and the pattern
  its file paths follow) when running on the Hub (SPACE_ID is set) or when
  BANANA100_SPACE_RELEASE is set: chains are listed up front and fetched when shown; scores come
  from the release's published scores file if it has one, otherwise they are computed for the
  chain being looked at (classical metrics on the CPU, deep ones under `@spaces.GPU`), cached
  on disk, with progress shown;
- a dataset of your own when BANANA100_SPACE_DATASET is set (with BANANA100_SPACE_SCORES);
- otherwise (offline) a simulated demo set built on first start, which the page says plainly.

Configuration (environment variables; on the Hub, the Space's "Variables" settings):

  BANANA100_SPACE_RELEASE  the release: Hub dataset id, hf:// URL, or a local copy laid out the same
  BANANA100_SPACE_RELEASE_PATTERN  how its file paths name chain and step (an import-chains pattern)
  BANANA100_SPACE_METRICS  metrics computed on demand for the release (default piqe,niqe,brisque,
                           edit_damage,edit_damage_rel)
  BANANA100_SPACE_DATASET  a dataset folder, a run folder, or a Hub dataset id (owner/name)
  BANANA100_SPACE_SCORES   the scores file (`banana100 score`): a path or hf://datasets/<id>/<file>
  BANANA100_SPACE_CACHE    cache folder (demo set, downloads, scores); default ~/.cache/banana100-space;
                           the demo set in it is keyed by version and metrics, and the log says built or reused
  BANANA100_SPACE_DEMO     demo set size: CHAINSxSTEPS[xSIDE], default 4x20x768
  BANANA100_SPACE_DEMO_METRICS  metrics of the demo set, default "auto" (PIQE + NIQE/BRISQUE if at hand + edit_damage)
  BANANA100_SPACE_MAX_STEPS     cap of "Try it" steps with the simulated editor (default 30)

Run locally: `python space/app.py` (http://127.0.0.1:7860; GRADIO_SERVER_PORT to change).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no call home at start

try:  # ZeroGPU on Hugging Face: import before torch touches CUDA
    import spaces

    GPU = spaces.GPU
except ImportError:  # anywhere else: a no-op decorator

    def GPU(fn=None, **_kwargs):
        return fn if fn is not None else (lambda f: f)


try:
    import gradio as gr
except ModuleNotFoundError as _e:  # a core install: say how to get the Space's extra, not a traceback
    if _e.name != "gradio":
        raise
    from banana100 import extras as _extras
    from banana100.cli.common import EXIT_USAGE as _EXIT_USAGE

    print(f"space: gradio is not installed. Set up the Space with `bash setup.sh --space` in the clone, "
          f"or {_extras.install_hint('space')}", file=sys.stderr)
    sys.exit(_EXIT_USAGE)  # as the CLI does for a missing extra
import matplotlib.pyplot as plt
from PIL import Image

from banana100 import about, extras
from banana100 import explore as ex
from banana100.chains.editors import make_editor
from banana100.errors import Banana100Error
from banana100.protocol import DEFAULT_CHECK_STEPS, check_steps_for
from banana100.metrics.table import METRICS

MAX_UPLOAD_MB = 10
MAX_PIXELS = 16_000_000
WORK_SIDE = 512  # live chains run on images at most this large
MAX_STEPS = {"simulated": int(os.environ.get("BANANA100_SPACE_MAX_STEPS", "30")), "gemini": 10}
# "Try it" offers the Gemini editor where its extra (google-genai) is installed; the user pastes the
# key for each run, so none is needed here.
GEMINI = extras.extra_installed("gemini")


def _gpu_present() -> bool:
    """A GPU this process may use: ZeroGPU's (`spaces` makes torch report it) or a local one."""
    if not extras.extra_installed("diffusers"):
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no usable torch means no GPU here
        return False


# The open editor of "Try it" (issue 23): a diffusers pipeline, offered only where a GPU is present.
OPEN_MODEL = os.environ.get("BANANA100_SPACE_OPEN_EDITOR", "black-forest-labs/FLUX.2-klein-4B")
OPEN = _gpu_present()
OPEN_NOTE = ("Open editors (FLUX.2, Qwen-Image-Edit) run only where a GPU is present; "
             + (f"this Space has one: pick `open` to run {OPEN_MODEL}." if OPEN else
                "this Space has none, so they are not offered here. Run them on your own GPU: "
                "`banana100 generate --editor diffusers --model <id>` (docs/open-editors.md)."))
if OPEN:
    MAX_STEPS["open"] = 10


@GPU(duration=120)
def _open_edit(request):
    """One open-editor step on the GPU (ZeroGPU lends it for this call)."""
    editor = make_editor("diffusers", model=OPEN_MODEL)  # the pipeline itself is loaded once per process
    return editor.edit(request)


class _OpenEditor:
    """The diffusers editor with each step under @spaces.GPU (stream_chain calls `edit`)."""

    name, model, metered, price, max_batch = "diffusers", OPEN_MODEL, False, "free", 1

    def edit(self, request):
        return _open_edit(request)


# -- data ---------------------------------------------------------------------------------------


def _demo_size() -> tuple[int, int, int]:
    raw = os.environ.get("BANANA100_SPACE_DEMO", "4x20x768")
    try:
        parts = [int(p) for p in raw.lower().split("x")]
        chains, steps, side = (parts + [768])[:3]
    except ValueError:
        raise SystemExit(f"BANANA100_SPACE_DEMO must look like 4x20x768 (chains x steps x side), got {raw!r}")
    return chains, steps, side


def _release_metrics() -> list[str]:
    from banana100.metrics.resolve import parse_metrics  # also pyiqa:<id> and a user's evaluate module

    return parse_metrics(os.environ.get("BANANA100_SPACE_METRICS", "piqe,niqe,brisque,edit_damage,edit_damage_rel"))


def _demo_explorer(cache: str, why: str = "") -> ex.Explorer:
    chains, steps, side = _demo_size()
    dataset, scores_file = ex.build_demo_set(cache, chains=chains, steps=steps, side=side,
                                             metrics=os.environ.get("BANANA100_SPACE_DEMO_METRICS", "auto"),
                                             progress=True, log=lambda text: print(f"space: {text}", flush=True))
    explorer = ex.Explorer.open(dataset, scores_file, cache_dir=cache)
    explorer.note = (why + " " if why else "") + ex.demo_note(explorer, chains, steps, side)
    return explorer


def load_explorer() -> ex.Explorer:
    cache = os.environ.get(ex.CACHE_ENV) or str(ex.DEFAULT_CACHE)
    source = ex.space_source()
    if source == "dataset":
        scores = os.environ.get(ex.SCORES_ENV, "").strip() or None
        return ex.Explorer.open(os.environ[ex.DATASET_ENV].strip(), scores, cache_dir=cache, note="")
    if source == "release":
        spec = ex.ReleaseSpec.from_env()
        try:
            return ex.open_release(spec, cache, metrics=_release_metrics())
        except Banana100Error as e:  # offline, renamed, a layout we did not expect: say so, show the demo
            print(f"space: the release could not be opened: {e}", flush=True)
            return _demo_explorer(cache, why=f"**The original release could not be opened** ({e}).")
    print(f"space: no {ex.DATASET_ENV} or {ex.RELEASE_ENV} set and not on the Hub", flush=True)
    return _demo_explorer(cache)


EXPLORER = load_explorer()
CHAINS = EXPLORER.images.chains
SOURCES = sorted({c.source_id for c in CHAINS.values()})


def _settings(source):
    return sorted({c.setting for c in CHAINS.values() if c.source_id == source})


def _repeats(source, setting):
    """The third picker's entries: repeats, or variant / chat mode and repeat (a release's supplement)."""
    return sorted({c.choice for c in CHAINS.values() if c.source_id == source and c.setting == setting},
                  key=lambda v: (isinstance(v, str), str(v) if isinstance(v, str) else v))


def _chain(source, setting, repeat) -> str:
    try:
        cid = EXPLORER.find(str(source), str(setting), repeat)
    except (TypeError, ValueError):
        cid = None
    if cid is None:
        raise gr.Error(f"no chain for source {source!r}, setting {setting!r}, repeat {repeat!r}")
    return cid


def _figure(curves, step, last_step, title=None, check_steps=None):
    fig = ex.plot_curves(curves, step=step, last_step=last_step, title=title,
                         check_steps=EXPLORER.check_steps if check_steps is None else check_steps,
                         reference_step=EXPLORER.reference_step)
    plt.close(fig)  # gradio still renders a closed figure; closing keeps pyplot from piling them up
    return fig


# -- Explore ------------------------------------------------------------------------------------


@GPU(duration=180)
def _score_on_gpu(cid: str, metrics: list[str]) -> None:
    """Deep metrics of one chain on the GPU (ZeroGPU runs this in its own process: the results
    reach the page through the on-disk cache, read back by `load_cached`)."""
    from banana100.metrics.engine.scorer import default_device

    EXPLORER.score_chain(cid, metrics=metrics, device=default_device())


def _ensure_scores(cid: str, progress) -> None:
    """Score the chain being looked at with the on-demand metrics it still lacks (cached after)."""
    from banana100.metrics.table import METRICS

    missing = EXPLORER.missing_metrics(cid)
    if not missing:
        return
    classical = [m for m in missing if m in METRICS and "native" in METRICS[m].backends]
    deep = [m for m in missing if m not in classical]
    if classical:
        EXPLORER.score_chain(cid, metrics=classical, device="cpu",
                             progress=lambda frac, text: progress(frac, desc=text))
    if deep:
        progress(0.5, desc=f"scoring {', '.join(ex.metric_label(m) for m in deep)} on the GPU")
        _score_on_gpu(cid, deep)
        EXPLORER.load_cached(cid)


def _why(cid: str, step: int):
    info = EXPLORER.info(cid)
    if step < 1 or len(info.steps) < 2:
        return None, None, None, None, "Pick a step after step 1 to see what changed since step 1."
    view = EXPLORER.why(cid, step)
    fig = ex.plot_mscn_histograms(view, 1, step)
    plt.close(fig)
    top, left, size = view["box"]
    shapes = (f"step 0 (source) {view['source_alpha']:.2f}, " if "source_alpha" in view else "") + \
        f"step 1 {view['alpha'][0]:.2f}, step {step} {view['alpha'][1]:.2f}"
    text = (f"Step {step} against step 1, a {size}x{size} crop at full size (top {top}, left {left}: the flattest "
            f"part of step 1, where grain shows first). Shape of the generalised Gaussian fitted to the whole "
            f"image's MSCN coefficients (2 = Gaussian): {shapes}.")
    text += ex.damage_table(view.get("damage"), 1, step)  # the detector's components: what it sees
    return view["crop"], view["residual"], view["mscn"], fig, text


def show_step(source, setting, repeat, step):
    """The image at `step`, and the curves with the marker at `step`."""
    cid = _chain(source, setting, repeat)
    info = EXPLORER.info(cid)
    step = min(max(int(step), 0), info.last_step)
    return EXPLORER.image(cid, step), _figure(EXPLORER.curves(cid), step, info.last_step)


def show_why(source, setting, repeat, step):
    """The "why it fails" view of `step`: crop, residual since step 1, MSCN map, histograms."""
    cid = _chain(source, setting, repeat)
    info = EXPLORER.info(cid)
    return _why(cid, min(max(int(step), 0), info.last_step))


def show_chain(source, setting, repeat, step=None, progress=gr.Progress()):  # noqa: B008 - gradio's way
    """Everything for a newly picked chain: slider range, source, step image, curves, verdicts, summary."""
    cid = _chain(source, setting, repeat)
    info = EXPLORER.info(cid)
    try:
        _ensure_scores(cid, progress)
    except Banana100Error as e:
        gr.Warning(f"scores for this chain could not be computed: {e}")
    step = info.last_step if step is None else min(max(int(step), 0), info.last_step)
    image, fig = show_step(source, setting, repeat, step)
    return (gr.Slider(minimum=0, maximum=info.last_step, value=step, step=1),
            EXPLORER.image(cid, 0), image, fig, EXPLORER.verdicts(cid), EXPLORER.summary(), _summary_line())


def _summary_line() -> str:
    n = EXPLORER.scored_chains()
    if EXPLORER.on_demand is not None:
        return (f"**Failure rate over the chains scored so far** ({n} of {len(CHAINS)}; each chain is scored when "
                "first shown): share of complete chains where the metric missed the damage.")
    return "**Failure rate over all chains** (share of complete chains where the metric missed the damage)."


def pick_source(source):
    settings = _settings(source)
    setting = settings[0] if settings else None
    repeats = _repeats(source, setting)
    return (gr.Dropdown(choices=settings, value=setting),
            gr.Dropdown(choices=repeats, value=repeats[0] if repeats else None))


def pick_setting(source, setting):
    repeats = _repeats(source, setting)
    return gr.Dropdown(choices=repeats, value=repeats[0] if repeats else None)


# -- Try it -------------------------------------------------------------------------------------

_SCORERS: dict[str, dict] = {}
_SCORERS_LOCK = threading.Lock()
LIVE_METRICS = ex.live_metrics(EXPLORER.metrics())


@GPU
def score_image(rgb) -> dict[str, float]:
    """Every live metric's score of one image (on the GPU when there is one)."""
    from banana100.metrics.engine.scorer import default_device
    from banana100.scoring import build_scorers

    device = default_device()
    with _SCORERS_LOCK:
        if device not in _SCORERS:
            _SCORERS[device] = build_scorers(LIVE_METRICS, device=device)
        scorers = _SCORERS[device]
    out = {}
    for name, scorer in scorers.items():
        try:
            out[name] = scorer.score_arrays([rgb])[0]
        except Banana100Error:
            out[name] = float("nan")
    return out


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _still(rgb, path: Path) -> str:
    """`rgb` written once to `path` (WebP, as Gradio would), for the live tab to hand out.

    Yielded as arrays, every earlier thumbnail was re-encoded into the same cache file at each
    step, truncating it while the page (or a client) was still downloading it: an empty image.
    Gradio copies a yielded file into its cache under a temporary name, so no reader sees it half
    written."""
    Image.fromarray(rgb).save(path, format="WEBP")
    return str(path)


def run_live(upload, sample, steps, editor_name, api_key):
    """Stream a live chain: (current image, gallery, curves, verdicts, status) after every step."""
    api_key = (api_key or "").strip()
    editor_name = editor_name if editor_name in MAX_STEPS and (editor_name != "gemini" or GEMINI) else None
    if editor_name is None:
        raise gr.Error("choose an editor from the list")
    try:
        steps = int(steps)
    except (TypeError, ValueError):
        raise gr.Error("steps must be a whole number") from None
    cap = MAX_STEPS[editor_name]
    if not 1 <= steps <= cap:
        raise gr.Error(f"steps must be between 1 and {cap} with the {editor_name} editor")
    try:
        if upload:
            rgb = ex.check_upload(upload, max_bytes=MAX_UPLOAD_MB * 1024**2, max_pixels=MAX_PIXELS,
                                   min_side=max(METRICS[m].min_size for m in LIVE_METRICS))
            origin = "your image"
        elif sample:
            rgb = ex.sample_image(str(sample))
            origin = f"sample '{sample}'"
        else:
            raise gr.Error("upload an image or pick a sample")
    except ex.UploadError as e:
        raise gr.Error(f"Upload refused: {e}") from None
    rgb = ex.shrink(rgb, WORK_SIDE if editor_name == "simulated" else 1024)
    if editor_name == "open":
        editor = _OpenEditor()
    elif editor_name == "gemini":
        if not api_key:
            raise gr.Error("paste your Gemini API key to use the Gemini editor (it is used for this run only)")
        try:
            editor = make_editor("gemini", api_key=api_key)
        except Exception as e:  # noqa: BLE001 - never echo the key back
            raise gr.Error(f"cannot start the Gemini editor: {_redact(str(e), api_key)}") from None
    else:
        editor = make_editor("simulated")

    rows, gallery = [], []
    stills = Path(tempfile.mkdtemp(prefix="banana100-live-"))
    try:
        # a short live chain is judged at steps that fit it (2, 5, 10 for ten steps; the paper's 5, 10, 20)
        live_checks = check_steps_for(steps, EXPLORER.reference_step)
        for step, image, _meta in ex.stream_chain(editor, rgb, steps):
            for metric, score in score_image(image).items():
                rows.append({"step": step, "metric": metric, "score": score})
            shown = _still(image, stills / f"step-{step:03d}.webp")
            gallery.append((_still(ex.shrink(image, 160), stills / f"thumb-{step:03d}.webp"), f"step {step}"))
            curves = ex.chain_curves(ex.scores_frame(rows), ex.LIVE_CHAIN_ID)
            fig = _figure(curves, step, steps, title=f"Live chain from {origin}: step {step} of {steps}",
                          check_steps=live_checks or DEFAULT_CHECK_STEPS)
            status = f"Step {step} of {steps} done ({editor_name} editor)."
            verdicts = None
            if step == steps:
                from banana100.report import analyse

                status = f"Done: {steps} steps ({editor_name} editor). "
                if live_checks:
                    verdicts = ex.verdict_table(analyse(ex.scores_frame(rows), reference_step=EXPLORER.reference_step,
                                                        check_steps=live_checks), ex.LIVE_CHAIN_ID, live_checks)
                    status += (f"Judged at steps {', '.join(map(str, live_checks))} against step "
                               f"{EXPLORER.reference_step}" + ("." if live_checks == DEFAULT_CHECK_STEPS else
                                                               " (the paper's: 5, 10 and 20; run 20 steps for those)."))
                else:
                    status += "The protocol needs at least two steps; run 20 for the paper's steps 5, 10 and 20."
            yield shown, gallery, fig, verdicts, status
    except gr.Error:
        raise
    except Exception as e:  # noqa: BLE001 - show the editor's error, without the key
        raise gr.Error(f"the chain stopped: {_redact(str(e), api_key)}") from None
    finally:  # Gradio copied every yielded file into its cache before asking for the next step
        shutil.rmtree(stills, ignore_errors=True)


# -- the page -----------------------------------------------------------------------------------

INTRO = f"""
# Banana100: watch an image fall apart while the metrics look away

An image editor is asked to copy an image, then to copy the copy, again and again. By step 5-10 a
person sees static noise and colour drift. Move the slider and compare: a metric that sees the
damage goes **down** (curves normalised so that down = worse). On the paper's real Nano Banana Pro
chains no pyiqa metric saw it in every chain, and BRISQUE even scored the noisy copies as *better*
(34.1 -> -9.8). Paper: [{about.PAPER_TITLE}]({about.PAPER_URL}).
"""

WHY = """
**Why the metrics miss it.** NIQE and BRISQUE never judge the picture itself: they compute its
*MSCN coefficients* (each pixel minus its local mean, divided by its local contrast: the right-hand
map) and score how far the shape of their histogram lies from that of undistorted photographs,
which is close to a Gaussian (a fitted shape near 2; blur makes it peaked, below 2). A smooth,
generated source has a peaked histogram, much like a blurred photograph; the grain of the copies
widens it toward (and later past) the photographs' shape, so a metric built on these statistics can
rate the grainy copies as *better*. Left: the step at full size; middle: what changed since step 1 (its high
frequencies, amplified 4x); right: the MSCN map the metrics measure.
"""

LICENCES = f"""
**Licences.** Code: {about.CODE_LICENCE}. Banana100 data ([{about.ORIGINAL_DATASET}](https://huggingface.co/datasets/{about.ORIGINAL_DATASET})):
CC BY-NC-SA 4.0. Metric scores are computed with pyiqa, licensed {about.PYIQA_LICENCE}, and each parameter
file or checkpoint keeps its authors' licence (NIQE, BRISQUE: LIVE licence): fine for research, not for a
commercial product without checking those licences. Your uploads and API keys are not stored.
"""

_CHECKS = EXPLORER.check_steps
PROTOCOL = ("**Protocol verdict for this chain.** Oriented score: the score turned so that down = worse for "
            f"every metric. {', '.join(f'd{k}' for k in _CHECKS)}: its change from step {EXPLORER.reference_step} "
            f"to steps {', '.join(map(str, _CHECKS))}"
            + ("" if _CHECKS == DEFAULT_CHECK_STEPS else
               f" (the paper's: 5, 10, 20; the longest chain here ends at step {max(c.last_step for c in CHAINS.values())})")
            + ". A metric passes only if all are negative; rho: Spearman correlation of oriented score with step "
            "(-1: follows the damage). "
            "Step 0, the clean source, is left out: a metric may score it far worse than the first copy (a "
            "step-0 jump: it reacts to what the first edit changes, not to quality). A score at the end of its "
            "range is saturated and cannot move: PIQE gives 100, its worst, to a clean smooth image with too few "
            "textured blocks to judge. n/a: no score (too small, or a uniform image).")


# No web fonts (the default theme fetches Google Fonts): the page looks the same offline.
THEME = gr.themes.Soft(primary_hue="amber", font=["ui-sans-serif", "system-ui", "sans-serif"],
                       font_mono=["ui-monospace", "monospace"])


def build() -> gr.Blocks:
    first = CHAINS[EXPLORER.chain_ids()[0]]
    with gr.Blocks(title="Banana100: metrics that look away", analytics_enabled=False) as demo:
        gr.Markdown(INTRO)
        if EXPLORER.note:
            gr.Markdown(EXPLORER.note, elem_id="demo-note" if EXPLORER.images.kind != "original release"
                        else "release-note")
        with gr.Tab("Explore", id="explore"):
            kind = EXPLORER.images.kind
            data_line = (f"Data: {kind} `{EXPLORER.images.location}` ({len(CHAINS)} chains)"
                         + (", licence CC BY-NC-SA 4.0" if kind == "original release" else "")
                         + f"; metrics: {', '.join(ex.metric_label(m) for m in EXPLORER.metrics()) or 'no scores configured'}.")
            gr.Markdown(data_line, elem_id="data-line")
            with gr.Row():
                source = gr.Dropdown(SOURCES, value=first.source_id, label="source image", elem_id="source")
                setting = gr.Dropdown(_settings(first.source_id), value=first.setting, label="setting", elem_id="setting")
                repeat = gr.Dropdown(_repeats(first.source_id, first.setting), value=first.choice,
                                     label="variant, chat and repeat" if any(c.kind for c in CHAINS.values()) else "repeat",
                                     elem_id="repeat")
            step = gr.Slider(0, first.last_step, value=first.last_step, step=1, label="step (0 = the source image)",
                             elem_id="step")
            with gr.Row(equal_height=True):
                src_img = gr.Image(label="source (step 0)", type="pil", interactive=False, elem_id="source-image",
                                   height=300)
                step_img = gr.Image(label="this step", type="pil", interactive=False, elem_id="step-image", height=300)
            plot = gr.Plot(show_label=False, elem_id="curves")
            gr.Markdown(PROTOCOL)
            verdicts = gr.Dataframe(label="verdict per metric, this chain", interactive=False, elem_id="verdicts")
            summary_line = gr.Markdown(_summary_line(), elem_id="summary-line")
            summary = gr.Dataframe(value=EXPLORER.summary(), label="all chains", interactive=False, elem_id="summary")
            with gr.Accordion("Why the metrics miss it", open=True, elem_id="why"):
                gr.Markdown(WHY)
                with gr.Row(equal_height=True):
                    why_crop = gr.Image(label="this step (full size)", type="pil", interactive=False,
                                        elem_id="why-crop", height=260)
                    why_res = gr.Image(label="changed since step 1 (x4)", type="pil",
                                       interactive=False, elem_id="why-residual", height=260)
                    why_mscn = gr.Image(label="MSCN map (NIQE, BRISQUE)", type="pil", interactive=False,
                                        elem_id="why-mscn", height=260)
                with gr.Row():
                    why_hist = gr.Plot(show_label=False, elem_id="why-hist")
                    why_text = gr.Markdown("", elem_id="why-text")

            chain_outputs = [step, src_img, step_img, plot, verdicts, summary, summary_line]
            why_inputs, why_outputs = [source, setting, repeat, step], [why_crop, why_res, why_mscn, why_hist, why_text]
            source.input(pick_source, [source], [setting, repeat], api_name=False).then(
                show_chain, [source, setting, repeat], chain_outputs, api_name=False).then(
                show_why, why_inputs, why_outputs, api_name=False)
            setting.input(pick_setting, [source, setting], [repeat], api_name=False).then(
                show_chain, [source, setting, repeat], chain_outputs, api_name=False).then(
                show_why, why_inputs, why_outputs, api_name=False)
            repeat.input(show_chain, [source, setting, repeat], chain_outputs, api_name=False).then(
                show_why, why_inputs, why_outputs, api_name=False)
            step.input(show_step, [source, setting, repeat, step], [step_img, plot], api_name="show_step",
                       trigger_mode="always_last", show_progress="hidden").then(
                show_why, why_inputs, why_outputs, api_name="show_why", show_progress="hidden")
            gr.Button("show chain", visible=False).click(show_chain, [source, setting, repeat, step], chain_outputs,
                                                         api_name="show_chain")
            demo.load(show_chain, [source, setting, repeat], chain_outputs, api_name=False).then(
                show_why, why_inputs, why_outputs, api_name=False)

        with gr.Tab("Try it", id="try"):
            gr.Markdown(f"Start a chain of your own: upload an image (PNG, JPEG, WebP or BMP, at most "
                        f"{MAX_UPLOAD_MB} MB and {MAX_PIXELS // 1_000_000} megapixels) or pick a sample, and watch "
                        "each copy and the metric curves arrive step by step. The simulated editor runs here, "
                        "offline; it models the damage and is not a real editor."
                        + (" The Gemini editor calls Google's API with *your* key, which is used for this run only "
                           "and never stored or logged." if GEMINI else "") + " " + OPEN_NOTE)
            with gr.Row():
                with gr.Column(scale=1):
                    upload = gr.File(label="upload an image", file_types=["image"], type="filepath", elem_id="upload")
                    sample = gr.Dropdown(ex.sample_names(), value=ex.sample_names()[0], label="...or a sample",
                                         elem_id="sample")
                    editors = ["simulated"] + (["gemini"] if GEMINI else []) + (["open"] if OPEN else [])
                    editor = gr.Radio(editors, value="simulated", label="editor", elem_id="editor")
                    key = gr.Textbox(label="Gemini API key (not stored)", type="password", visible=False,
                                     elem_id="api-key")
                    n_steps = gr.Slider(1, MAX_STEPS["simulated"], value=min(20, MAX_STEPS["simulated"]), step=1,
                                        label="steps", elem_id="live-steps")
                    go = gr.Button("Run the chain", variant="primary", elem_id="run")
                with gr.Column(scale=2):
                    live_img = gr.Image(label="latest copy", type="numpy", interactive=False, elem_id="live-image",
                                        height=300)
                    status = gr.Markdown("", elem_id="live-status")
            live_plot = gr.Plot(show_label=False, elem_id="live-curves")
            live_verdicts = gr.Dataframe(label="verdict per metric (after 20 steps or more)", interactive=False,
                                         elem_id="live-verdicts")
            gallery = gr.Gallery(label="every step", columns=10, height=260, elem_id="live-gallery")

            def pick_editor(name):
                cap = MAX_STEPS.get(name, 1)
                return gr.Textbox(visible=name == "gemini", value=""), gr.Slider(maximum=cap, value=min(cap, 20))

            editor.change(pick_editor, [editor], [key, n_steps], api_name=False)
            go.click(run_live, [upload, sample, n_steps, editor, key],
                     [live_img, gallery, live_plot, live_verdicts, status], api_name="run_live", concurrency_limit=2)
        with gr.Tab("Leaderboard", id="leaderboard") as board_tab:
            gr.Markdown("Every metric on the chains scored here so far, by setting (and editor when known; chat "
                        "mode and variant where the chains differ in them): how many chains it was shown, how many "
                        f"it failed (a check step, {', '.join(map(str, EXPLORER.check_steps))}, not worse than step "
                        f"{EXPLORER.reference_step}) and "
                        "its mean Spearman rho between step and score (-1: worse at every step). Best first. "
                        "The same table for your own scores files: `banana100 report SCORES... --by setting,editor`.",
                        elem_id="leaderboard-note")
            board = gr.Dataframe(value=EXPLORER.leaderboard(), interactive=False, elem_id="leaderboard")
            heat = gr.Image(value=_leaderboard_png(), type="filepath", interactive=False, show_label=False,
                            elem_id="leaderboard-heatmap")
            board_tab.select(lambda: (EXPLORER.leaderboard(), _leaderboard_png()), None, [board, heat],
                             api_name="leaderboard")
        gr.Markdown(LICENCES)
    return demo


def _leaderboard_png() -> str | None:
    """The heatmap of the leaderboard, written once per content into the Space's cache."""
    import hashlib

    table = EXPLORER.leaderboard()
    if not len(table):
        return None
    digest = hashlib.sha256(table.to_csv().encode()).hexdigest()[:16]
    path = Path(os.environ.get(ex.CACHE_ENV) or str(ex.DEFAULT_CACHE)) / "leaderboard" / f"{digest}.png"
    if not path.is_file():  # never rewritten while a browser may be reading it
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        EXPLORER.leaderboard_png(tmp)
        tmp.replace(path)
    return str(path)


def main() -> None:
    demo = build()
    demo.queue(default_concurrency_limit=4, max_size=32)
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                max_file_size=f"{MAX_UPLOAD_MB}mb", theme=THEME, show_error=True,
                run_history=False)  # run history would keep inputs (an API key) in the browser


if __name__ == "__main__":
    sys.exit(main())
