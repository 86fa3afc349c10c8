"""Metric cards (`metrics/<name>/README.md`), generated from the metric table.

The facts in a card (direction, nominal range, minimum size, parameter files, hashes,
licences, paper, citation) come from `banana100.metrics.table`; this file adds only prose. Cards
are committed; a test fails when a committed card differs from `render_metric_card`.

    python -m banana100.metrics.hub.cards                 # rewrite the cards of every metrics/<name>/<name>.py
    python -m banana100.metrics.hub.cards --check         # exit 1 when a card is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from banana100.metrics.hub.card_native import (  # noqa: F401 - NATIVE_DATA: read from here too
    NATIVE_DATA, PYIQA_VERSION, agreement_section, flat_output, flat_regime_section,
)
from banana100.metrics.table import MetricSpec, get_metric
from banana100.metrics.weights import ENV_VAR


# What each metric measures (prose only; facts live in the metric table).
_DESCRIPTIONS = {
    "edit_damage": (
        "Edit damage is this toolkit's reference-free detector of what recursive editing does to an image: "
        "grain in the flattest tiles, a periodic lattice in the residual, a colour cast of the greys and the "
        "softness of the strongest edges, summed (compute(components=True) returns each)."
    ),
    "piqe": (
        "PIQE (Perception-based Image Quality Evaluator) is an opinion-unaware, training-free "
        "no-reference metric. It splits the luminance of the image into 16x16 blocks, keeps the "
        "spatially active ones, and marks each for blocking artefacts (flat segments along the "
        "block edges) and for noise (centre-surround deviation of the normalised luminance). "
        "The score is the mean distortion of the active blocks, scaled to 0-100."
    ),
    "niqe": (
        "NIQE (Natural Image Quality Evaluator) is a 'completely blind' no-reference metric: it "
        "uses no human opinion scores. It fits a multivariate Gaussian to natural-scene-statistics "
        "features (MSCN coefficients and the products of neighbouring coefficients) of 96x96 "
        "patches of the image's luminance, at two scales, and reports the distance between that "
        "Gaussian and one fitted on pristine natural images (the LIVE pristine model)."
    ),
    "brisque": (
        "BRISQUE (Blind/Referenceless Image Spatial Quality Evaluator) computes 36 "
        "natural-scene-statistics features of the image's luminance (generalised Gaussian fits "
        "of MSCN coefficients and of products of neighbouring coefficients, at two scales) and "
        "maps them to a quality score with the support-vector regressor that LIVE trained on "
        "the LIVE IQA database (DMOS, so higher means more distorted)."
    ),
    "ilniqe": (
        "IL-NIQE (Integrated Local NIQE) is a training-free, opinion-unaware extension of NIQE. "
        "It resizes the image to 524x524, extracts a richer feature set from 84x84 patches at two "
        "scales (MSCN statistics, gradient magnitudes, log-Gabor responses and colour statistics "
        "in a log-opponent space), reduces it with PCA, and averages the per-patch distances to a "
        "multivariate Gaussian fitted on pristine images (the official IL-NIQE template model)."
    ),
    "nrqm": (
        "NRQM (Ma et al.) was learned for super-resolved images: it computes local frequency "
        "(DCT), global frequency (wavelet) and spatial (PCA) features of the image and maps them "
        "to a 0-10 quality score with a cascade of regression forests trained on human ratings."
    ),
    "pi": (
        "The Perceptual Index of the 2018 PIRM super-resolution challenge combines two "
        "no-reference scores: PI = ((10 - NRQM) + NIQE) / 2, so lower means more natural-looking."
    ),
    "cnniqa": (
        "CNNIQA is a shallow convolutional network (one convolution layer with max and min "
        "pooling, two fully connected layers) that regresses quality from 32x32 normalised "
        "patches; pyiqa's checkpoint was trained on KonIQ-10k."
    ),
    "dbcnn": (
        "DBCNN (Deep Bilinear CNN) pools two streams bilinearly: a VGG-16 trained on ImageNet "
        "(authentic, content-related features) and a small CNN (S-CNN) pre-trained to classify "
        "synthetic distortions; a linear layer maps the pooled features to quality (KonIQ-10k)."
    ),
    "hyperiqa": (
        "HyperIQA first recognises the image content with a ResNet-50, then a hyper network "
        "turns those semantics into the weights of a small quality-prediction network, which "
        "scores multi-scale content features (KonIQ-10k checkpoint)."
    ),
    "wadiqam_nr": (
        "WaDIQaM-NR is a deep CNN (ten convolution layers) that predicts a quality and a weight "
        "for each 32x32 patch and reports the weighted average (KonIQ-10k checkpoint)."
    ),
    "nima": (
        "NIMA (Neural Image Assessment) predicts the distribution of human ratings (1-10) with "
        "an Inception-ResNet-v2 trained on the AVA aesthetics dataset and reports its mean; it "
        "scores aesthetics as much as technical quality."
    ),
    "paq2piq": (
        "PaQ-2-PiQ is a ResNet-18 with region-of-interest pooling trained on the LIVE-FB "
        "database of patch and picture ratings; it scores the whole picture from patch-level "
        "quality."
    ),
    "musiq": (
        "MUSIQ (Multi-Scale Image Quality Transformer) encodes the image at its native "
        "resolution and aspect ratio plus two rescaled copies as 32x32 patches with hash-based "
        "2-D spatial and scale embeddings, and regresses quality with a transformer (KonIQ-10k)."
    ),
    "maniqa": (
        "MANIQA (Multi-dimension Attention Network) feeds ViT-B/8 features through transposed "
        "attention blocks and scale Swin transformer blocks and predicts quality with a "
        "patch-weighted dual-branch head (KonIQ-10k checkpoint)."
    ),
    "tres": (
        "TReS combines ResNet-50 features (local) with a transformer encoder (non-local) and is "
        "trained with a relative-ranking loss and a self-consistency loss between an image and "
        "its horizontal flip (KonIQ-10k checkpoint)."
    ),
    "topiq_nr": (
        "TOPIQ (top-down IQA) uses high-level semantic features of a ResNet-50 to guide "
        "attention over lower-level, distortion-sensitive features (cross-scale attention), "
        "then pools them into a quality score (no-reference variant, KonIQ-10k checkpoint)."
    ),
    "clipiqa": (
        "CLIP-IQA scores an image by the softmax similarity of its CLIP (RN50) embedding to "
        "antonym prompt pairs ('Good image' / 'bad image', 'Sharp image' / 'blurry image', ...) "
        "averaged over the pairs; no IQA training (pyiqa's multi-prompt variant)."
    ),
    "liqe": (
        "LIQE (Language-Image Quality Evaluator) fine-tunes CLIP ViT-B/32 on several IQA "
        "datasets with a multitask vision-language objective (quality level, scene, distortion "
        "type); the score is the expectation over five quality-level prompts (KonIQ-10k)."
    ),
    "qualiclip": (
        "QualiCLIP is CLIP RN50 fine-tuned without human opinion scores: it learns to rank "
        "increasingly degraded crops against antonym quality prompts; the score is the "
        "prompt-similarity softmax, like CLIP-IQA."
    ),
    "arniqa": (
        "ARNIQA learns an image-distortion manifold: a ResNet-50 trained contrastively so that "
        "images with the same degradation lie close together; a linear regressor on the "
        "features of the image and its half-size copy gives the score (KonIQ-10k regressor)."
    ),
    "qalign": (
        "Q-Align (the OneAlign checkpoint) is a large multimodal model (mPLUG-Owl2, about 8B "
        "parameters) taught to rate images with text levels (bad, poor, fair, good, excellent); "
        "the score is the probability-weighted mean of those levels (1-5)."
    ),
}

# How pyiqa's implementation reads the image, beyond the shared RGB policy.
_INPUT_NOTES = {
    "piqe": "PIQE works on the luminance (the Y of YIQ), normalised by the image's own maximum.",
    "niqe": (
        "NIQE works on the luminance (the Y of YIQ, rounded to 8 bits) and ignores the bottom "
        "and right pixels beyond the last whole 96x96 block."
    ),
    "brisque": (
        "BRISQUE works on the luminance (the Y of YCbCr). Images smaller than about 17 pixels "
        "a side often score NaN (too few pixels for the distribution fits)."
    ),
    "ilniqe": (
        "IL-NIQE itself resizes every image to 524x524 (MATLAB-style bicubic) before scoring, as "
        "the official code does, so scores of different-sized images are computed at one scale."
    ),
}

# Agreement of pyiqa (and so of this module) with the original implementation, measured by
# tests/metrics/test_reference_scores.py on the images in ../shared/reference-images.
def metric_description(name: str) -> str:
    """One paragraph on what the metric measures (used by the card and the module's info)."""
    spec = get_metric(name)
    text = _DESCRIPTIONS.get(
        spec.name, f"{spec.display_name} is a no-reference image quality metric ({spec.family}), as implemented in pyiqa."
    )
    return f"{text} {spec.display_name}: {spec.direction}; nominal range {format_range(spec)}."


def format_range(spec: MetricSpec) -> str:
    lo, hi = spec.score_range
    lo_s = "unbounded" if lo is None else f"{lo:g}"
    hi_s = "no fixed upper bound" if hi is None else f"{hi:g}"
    if hi is None:
        return f"{lo_s} and up ({hi_s})"
    return f"{lo_s} to {hi_s}"


def _header(spec: MetricSpec) -> str:
    meta = {
        "title": spec.display_name,
        "emoji": "\U0001f34c",
        "tags": ["evaluate", "metric", "image-quality-assessment", "no-reference"],
        "description": f"{spec.display_name} no-reference image quality score ({spec.direction}), "
        f"computed with pyiqa {PYIQA_VERSION}; part of the Banana100 toolkit.",
        # the folder is pushed as a Space (banana100 publish-metrics): its widget is app.py
        "sdk": "gradio",
        "app_file": "app.py",
        "pinned": False,
    }
    body = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{body}---\n"


def _size(wf) -> str:
    if wf.size is None:
        return "unknown"
    if wf.sha256 and wf.size < 1e6:  # a pinned small file: its exact size
        return f"{wf.size:,} bytes"
    gb = wf.size / 1e9
    return f"about {gb:.1f} GB" if gb >= 1 else f"about {wf.size / 1e6:.0f} MB"


def _where(wf) -> str:
    return {
        "pyiqa": "`$TORCH_HOME/hub/pyiqa/`",
        "torch": "`$TORCH_HOME/hub/checkpoints/` (torchvision's cache)",
        "clip": "`$TORCH_HOME/hub/clip/` (pyiqa's CLIP loader)",
        "hf": f"the Hugging Face cache (repo `{wf.repo_id}`)",
    }[wf.cache]


def _checksum(wf) -> str:
    if wf.sha256:
        return f"`{wf.sha256}`"
    if wf.sha256_prefix:
        return f"starts `{wf.sha256_prefix}`"
    return "not pinned"


def _fetch_example(wf) -> str:
    if wf.snapshot:
        return f"huggingface-cli download {wf.repo_id} --local-dir ~/iqa-weights/{wf.filename}"
    return f"curl -L -o ~/iqa-weights/{wf.filename} {wf.download_url}"


def _files_section(spec: MetricSpec) -> str:
    files = spec.all_files
    if not files:
        return f"{spec.display_name} needs no parameter file: it works offline as installed.\n"
    rows = "\n".join(
        f"| `{wf.filename}` | {wf.role} | {_size(wf)} | {wf.licence} | {_checksum(wf)} | {wf.download_url} | {_where(wf)} |"
        for wf in files
    )
    names = ", ".join(f"`{wf.filename}`" for wf in files)
    fetch = "\n".join(_fetch_example(wf) for wf in files)
    by_backend = ""
    if spec.pyiqa_files is not None:
        native = ", ".join(f"`{wf.filename}`" for wf in spec.backend_files("native"))
        pyiqa = ", ".join(f"`{wf.filename}`" for wf in spec.backend_files("pyiqa"))
        by_backend = (f"\nThe native backend (the default) reads {native} as released; "
                      f"`backend=\"pyiqa\"` reads {pyiqa}.\n")
    return f"""{spec.display_name} needs {names}:

| file | role | size | licence | sha256 | download | its library's cache |
| --- | --- | --- | --- | --- | --- | --- |
{rows}
{by_backend}
The files are looked for, in this order:

1. `${ENV_VAR}/<file>`: set `{ENV_VAR}` to a folder holding them (the way to work offline);
2. the cache of the library that reads the file (last column; `$TORCH_HOME` defaults to `~/.cache/torch`);
3. the Hugging Face cache (`huggingface_hub`);
4. a download into that cache, unless `HF_HUB_OFFLINE=1`.

The sha256 (or its prefix) is checked wherever the file is found. If a file is missing, the
module raises `WeightsNotFoundError`, naming the missing file, its URL and where to put it.
Nothing is downloaded when the module is imported. On a machine with internet,
`banana100 weights download {spec.name}` fetches everything; for an offline cluster:

```bash
mkdir -p ~/iqa-weights
{fetch}
export {ENV_VAR}=~/iqa-weights
banana100 weights check {spec.name}   # exit status 0 when every file is present and intact
```
"""


def _gpu_memory(spec: MetricSpec) -> str:
    one, two = spec.gpu_memory_gib
    if one is None and two is None:
        return ("not measured yet: run `bench/gpu/gpu_check.sh` on a GPU machine (it reports peak memory "
                "for one 1024x1024 and one 2048x2048 image).")
    fmt = lambda v: "not measured" if v is None else f"{v:.2f} GiB"
    return f"{fmt(one)} at 1024x1024, {fmt(two)} at 2048x2048 (peak, one image, batch 1; bench/gpu/gpu_check.py)."


def _precision(spec: MetricSpec) -> str:
    if spec.native:
        exact = ("native backend: float64 statistics and scores on CPU and GPU alike (mode \"pyiqa\" keeps pyiqa's "
                 "float32 in the steps where its rounding shows in the score), with TF32 held off whatever torch's "
                 "flags, so that a GPU gives the CPU's scores; `backend=\"pyiqa\"`: pyiqa's own float32. Never half "
                 "precision.")
    elif spec.half_tolerance is None:
        exact = ("float32 only, TF32 held off whatever torch's flags (the module never uses half precision for "
                 "this metric).")
    else:
        exact = (f"float32 by default, TF32 held off whatever torch's flags; `half=True` allowed on GPU, where scores "
                 f"stayed within "
                 f"{spec.half_tolerance:g} of float32 in bench/gpu/gpu_check.py.")
    return f"{exact} {_fast_precision(spec)}"


def _fast_precision(spec: MetricSpec) -> str:
    """The card's sentence on `precision="fast"`, from the measured data (precision_fast.json)."""
    what = "TF32" if spec.native else "TF32 and bfloat16 autocast"
    from banana100.metrics.precision import fast_errors  # torch: only when a card is written

    row = fast_errors().get(spec.name)
    if row is None:
        return (f"`precision=\"fast\"` ({what} on a GPU) is opt-in; its error against the default \"exact\" "
                "is not measured yet (bench/gpu/gpu_precision_check.py).")
    on = "two 512x512 images" + ("" if spec.native else ", random weights")
    exact = row.get("exact_vs_cpu_tf32_on")
    same = ("" if exact is None else f" On that GPU the default stayed within {exact:.2g} (relative) of the CPU's "
            "scores with torch's TF32 flags on (held off inside).")
    return (f"`precision=\"fast\"` ({what} on a GPU) is opt-in: on {row['device']} ({on}) its scores moved by up "
            f"to {row['fast_vs_exact_max_rel']:.2g} (relative) from the default \"exact\" "
            f"(bench/gpu/gpu_precision_check.py).{same}")


def _how_computed(spec: MetricSpec) -> str:
    n = spec.name
    if not spec.native:
        return f"""This module is a thin face over the `banana100` library: the score is the one pyiqa
{PYIQA_VERSION} (`pyiqa.create_metric("{n}")`) gives for the same image, computed by the
library's batched scoring engine."""
    return f"""This module is a thin face over the `banana100` library. By default the score is computed by
the library's native implementation (`banana100.metrics.native.{n}`): batched torch code, the same on
CPU and GPU, that reproduces pyiqa {PYIQA_VERSION}'s score (`pyiqa.create_metric("{n}")`; measured
agreement below) many times faster (BENCHMARKS.md). `backend="pyiqa"` computes the score with pyiqa
itself; `mode="official"` reproduces the original release instead of pyiqa's port."""


def _backend_inputs(spec: MetricSpec) -> str:
    half = ("- **precision** (`str`, optional): `\"exact\"` (default: IEEE float32, TF32 off) or `\"fast\"` "
            "(see **Precision** below).\n"
            "- **half** (`bool`, optional, default `False`): float16 autocast; refused unless the "
            "**Precision** line below states a measured tolerance.\n")
    if not spec.native:
        return "- **backend** (`str`, optional): `\"pyiqa\"`, the only backend of this metric.\n" + half
    return ("- **backend** (`str`, optional): `\"native\"` (default: the batched torch implementation) "
            "or `\"pyiqa\"`.\n"
            "- **mode** (`str`, optional): `\"pyiqa\"` (default: pyiqa's scores) or `\"official\"` "
            "(the original release's scores; native backend only).\n" + half)


def _pyiqa_licence(spec: MetricSpec) -> str:
    text = ("- pyiqa: PolyForm Noncommercial 1.0.0 since April 2026. Using pyiqa means using it under that "
            "licence: noncommercial use only unless you obtain other terms from pyiqa's authors.")
    if spec.native:
        return text + (" The native backend (the default) does not run pyiqa; `backend=\"pyiqa\"` and "
                       "the comparison tests do.")
    return text + " This metric's score is computed by pyiqa."


def _install_section(spec: MetricSpec) -> str:
    from banana100.extras import requirement

    extras = () if spec.native else ("deep",)
    line = requirement(extras)
    if spec.native:
        what = ("The core library is enough: the default native backend is torch code and needs no pyiqa; "
                f"`backend=\"pyiqa\"` needs the `deep` extra too (`{requirement(('deep',))}`).")
    else:
        what = (f"The `deep` extra brings pyiqa {PYIQA_VERSION}, which computes this score (and with it "
                "timm, OpenCV and pyiqa's other requirements: several GB with torch; BENCHMARKS.md).")
    return f"""## Installing

The module is a thin face over the `banana100` library, which is not on PyPI: install the
release the module was published with (the line in `requirements.txt` beside this card):

```bash
pip install "{line}"
```

{what} Without banana100, `evaluate.load` stops with evaluate's ImportError quoting this
command (the `# From:` comment on the module's import line).
"""


def render_metric_card(name: str) -> str:
    """The README.md of `metrics/<name>/`, from the metric table."""
    spec = get_metric(name)
    if spec.family == "detector":  # this toolkit's own detector: its card is mostly its validation
        from banana100.metrics.detector import card as detector_card

        return detector_card.render(spec)
    n, d = spec.name, spec.display_name
    return f"""{_header(spec)}
# Metric Card for {d}

## Metric Description

{metric_description(n)}

{_how_computed(spec)}

- **Direction:** {spec.direction}.
- **Nominal range:** {format_range(spec)}.
- **Family:** {spec.family}.

{_install_section(spec)}
{_usage_section(spec)}{_outputs_section(spec)}{_closing_sections(spec)}"""


def _usage_section(spec: MetricSpec) -> str:
    """How to Use and its Inputs: the call, the options, how images are read and sized, failures."""
    n, d = spec.name, spec.display_name
    return f"""## How to Use

```python
import evaluate

{n} = evaluate.load("metrics/{n}")  # the folder holding {n}.py and this card
out = {n}.compute(images=["a.png", "b.jpg"])  # paths, PIL images or HxWx3 uint8 arrays
# {{"metric": "{n}", "scores": [...], "mean": ..., "lower_better": {spec.lower_better}}}
```

`compute(images=...)` scores the images directly; `add_batch(images=...)` followed by
`compute()` also works (slower: evaluate stores every image in its cache first).

### Inputs

- **images** (`list`): file paths, PIL images, or HxWx3 `uint8` arrays.
- **device** (`str`, optional): `"cpu"`, `"cuda"`, `"cuda:1"`, ...; default `cuda` when available.
- **batch_size** (`int`, optional, default 8): the most same-size images per forward pass.
- **max_image_pixels** (`int`, optional): the largest width x height read from a file (default
  89,478,485, or `$BANANA100_MAX_IMAGE_PIXELS`).
{_backend_inputs(spec)}
Every image becomes RGB exactly as pyiqa reads a file (PIL `.convert("RGB")`): grayscale is
replicated to three channels, an alpha channel is dropped (not composited), 16-bit images keep
their high byte, float arrays must lie in [0, 1]. Images are **not** resized by the module.
{_INPUT_NOTES.get(n, "")}

**Input size handling (pyiqa's own, kept as is):** {spec.resize}. Same-size images are
batched together{"" if spec.batchable or spec.native else " only when the metric allows it; " + d + " scores one image at a time (batched scores would differ or the arch takes one image)"}.

**GPU memory:** {_gpu_memory(spec)}

**Precision:** {_precision(spec)}

**Minimum size:** {spec.min_size}x{spec.min_size} pixels. A smaller image raises
`ImageTooSmallError` naming the image and this minimum. {_min_size_note(spec)}

**Uniform images** (every pixel the same colour): {_uniform_note(spec)}

**No NaN scores:** a NaN or infinite result for one image (or a linear-algebra failure of the
metric on it) raises `ScoreUndefinedError` naming the image, after the other images are scored
(`error.scores`: None for that image; `error.errors`: each image's error); `banana100 score`
writes such an image as a row with a NaN score and the error text, and the protocol counts it as
a missing score, by name. A file that cannot be read (missing, corrupt, or over the pixel limit
of 89,478,485 pixels that guards against decompression bombs: raise it with
`max_image_pixels=` or `BANANA100_MAX_IMAGE_PIXELS`) raises `ImageReadError` naming the file.

"""


def _outputs_section(spec: MetricSpec) -> str:
    """Output Values, the agreement with the original implementation, the parameter files."""
    n = spec.name
    return f"""### Output Values

- **metric** (`str`): `"{n}"`.
- **scores** (`list[float]`): one score per image, in input order.
- **mean** (`float`): the mean of the scores.
- **lower_better** (`bool`): `{spec.lower_better}`.
{flat_output(spec)}
#### Agreement with the original implementation

{agreement_section(spec)}

{flat_regime_section(spec)}### Parameter files

{_files_section(spec)}
"""


def _closing_sections(spec: MetricSpec) -> str:
    """Limitations, licences, citation and references."""
    d = spec.display_name
    files_licences = "\n".join(f"  - `{wf.filename}`: {wf.licence}." for wf in spec.all_files) or (
        f"  - none: {d} needs no parameter file."
    )
    live = any("LIVE" in wf.licence for wf in spec.all_files)
    live_note = (
        "\nThe LIVE files come with the LIVE copyright notice (University of Texas at Austin): "
        "keep it with any copy of the files and acknowledge LIVE in publications that use them.\n"
        if live
        else ""
    )
    return f"""## Limitations and Bias

{d} is a no-reference metric: it scores how "natural" or undistorted an image looks, not how
faithful it is to a source. The Banana100 benchmark (arXiv 2604.03400) shows that NR-IQA
metrics like this one often fail to register the static noise and colour drift that build
up when an image editor copies an image again and again.

## Licences

- Module code (`banana100`): Apache-2.0.
{_pyiqa_licence(spec)}
- Parameter files keep their authors' licences:
{files_licences}
{live_note}
## Citation

```bibtex
{spec.citation or spec.paper}
```

{spec.paper}

## Further References

- pyiqa (IQA-PyTorch): https://github.com/chaofengc/IQA-PyTorch
{("- Original code: " + spec.original_code) if spec.original_code else ""}
- Banana100: https://arxiv.org/abs/2604.03400
"""


def _min_size_note(spec) -> str:
    """How the minimum was found: measured for the hand-crafted metrics, pyiqa's limit for the deep ones."""
    if spec.min_size_note:
        return spec.min_size_note
    return ("This is the smallest side pyiqa 0.1.16's arch scores without error (measured on the arch "
            "built with random weights). Whether smaller images still get meaningful scores depends on the "
            "trained weights, which were not at hand: `bench/metrics/bench_min_size.py` measures it where they are.")


def _uniform_note(spec) -> str:
    if spec.uniform_note:
        return spec.uniform_note
    if spec.uniform == "scored":
        return ("scored like any other image: the network returns a number (finite for the archs checked "
                "with random weights, `tests/metrics/test_degenerate_inputs.py`); whether it means anything for a blank "
                "image depends on the trained weights.")
    return f"{spec.uniform}."


def card_metrics(metrics_dir: str | Path) -> list[str]:
    """Metric names with a module in `metrics_dir` (`<name>/<name>.py`) and an entry in the metric table."""
    from banana100.metrics.table import METRICS

    root = Path(metrics_dir)
    return [n for n in METRICS if (root / n / f"{n}.py").is_file()]


def write_metric_cards(metrics_dir: str | Path, names: list[str] | None = None) -> list[Path]:
    """Write `<metrics_dir>/<name>/README.md` for each metric module present; return the paths."""
    root = Path(metrics_dir)
    written = []
    for n in names if names is not None else card_metrics(root):
        path = root / n / "README.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_metric_card(n), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m banana100.metrics.hub.cards", description=__doc__.splitlines()[0])
    ap.add_argument("--metrics-dir", default="metrics", help="folder holding <name>/<name>.py (default: ./metrics)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if a card is out of date")
    args = ap.parse_args(argv)
    root = Path(args.metrics_dir)
    names = card_metrics(root)
    if not names:
        print(f"no metric modules found under {root}", file=sys.stderr)
        return 1
    if args.check:
        stale = [n for n in names if not (root / n / "README.md").is_file()
                 or (root / n / "README.md").read_text(encoding="utf-8") != render_metric_card(n)]
        for n in stale:
            print(f"out of date: {root / n / 'README.md'} (run python -m banana100.metrics.hub.cards)")
        return 1 if stale else 0
    for p in write_metric_cards(root, names):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
