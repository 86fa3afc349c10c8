"""The shared bases of the evaluate modules (`metrics/<name>/<name>.py`): `IQAMetric` for the 21
metrics, `SensitivityProtocol` for the paper's protocol (`metrics/banana100_sensitivity`).

A module file only names its metric:

    import banana100.metrics.module as em

    class Niqe(em.IQAMetric):
        METRIC_NAME = "niqe"

(`evaluate.load` takes the first non-abstract `EvaluationModule` subclass in the module's
namespace; `IQAMetric` is abstract and the module refers to it through `em`, so the metric's
own class is the one found.)

`compute(images=[...])` scores the images directly with the engine: evaluate's usual path
(`add_batch` -> Arrow cache -> `compute`) re-encodes every image feature to PNG, which is pure
overhead here. `add`/`add_batch` followed by `compute()` still work, through that usual path.
"""

from __future__ import annotations

import abc
import os
from typing import Any

import datasets
import evaluate
import numpy as np
from PIL import Image

from banana100 import about
from banana100.errors import UsageError
from banana100 import protocol
from banana100.metrics.engine.scorer import MetricScorer, check_device
from banana100.metrics.table import get_metric, score_direction

_INPUTS_DESCRIPTION = """
Args:
    images: a list of images: file paths, PIL images, or HxWx3 uint8 arrays (also HxW
        grayscale, HxWx4, uint16, or float arrays in [0, 1]; see `banana100.imageio`).
    device: "cpu", "cuda", "cuda:1", ...; default cuda when available.
    batch_size: most same-size images per forward pass (default 8).
    backend: "native" (batched torch code; the default for the hand-crafted metrics) or
        "pyiqa"; deep metrics have only "pyiqa".
    mode: "pyiqa" (default: pyiqa's scores) or "official" (the original releases' scores;
        hand-crafted metrics with the native backend only).
    precision: "exact" (default: IEEE float32, TF32 off whatever torch's global flags) or "fast"
        (TF32 on a GPU, and bfloat16 autocast for the deep metrics; the card states its error).
    half: float16 autocast, only for metrics whose card states a measured half-precision
        tolerance (refused otherwise).
    max_image_pixels: the largest width x height read from a file (default 89,478,485, or
        $BANANA100_MAX_IMAGE_PIXELS): a guard against decompression bombs.
    components: (edit_damage only) also return each component of the score per image.
    references: (edit_damage only) the image each edit started from (a chain's step 0 or an
        earlier step): one per image, or one for all. The scores are then `edit_damage_rel`, the
        damage added since the reference (each component against the reference's own value;
        statistics, not pixels, so crops, shifts and new content do not count).
Returns:
    metric: the pyiqa id of the metric.
    scores: one float per image, in input order (never NaN).
    mean: the mean of the scores.
    lower_better: True when a lower score means better quality.
    flat_share: (hand-crafted metrics, native backend) per image, the share of windows that are
        flat or exact ramps, where the score depends on rounding; above the threshold its card states, a
        `banana100.metrics.native.FlatRegionWarning` is raised (the card says how far to trust the score).
    components: (with components=True) {name: [value per image]}: grain, lattice, colour_cast, softness
        (with references: what each added since the reference).
Raises:
    ImageTooSmallError: an image below the metric's smallest meaningful size (before scoring).
    ImageReadError: a file that cannot be read (missing, corrupt, over the pixel limit); when
        found while decoding, after the others were scored: `error.scores`, `error.errors`.
    ScoreUndefinedError: images with no defined score (a uniform image for a metric whose card
        says so, a NaN result), after the others were scored: `error.scores` (None for
        those), `error.errors` ({index: error}).
"""


def _as_list(images: Any) -> list:
    """One image, or a list of them, as a list (a 4-D array is a batch of HxWxC images)."""
    if isinstance(images, (str, os.PathLike, bytes, Image.Image)):
        return [images]
    if isinstance(images, np.ndarray):
        return list(images) if images.ndim == 4 else [images]
    return list(images)


def _from_arrow(value: Any) -> Any:
    """An `images` cell read back from evaluate's Arrow cache -> something load_rgb reads."""
    if isinstance(value, dict):  # Image(decode=False) gives {"bytes": ..., "path": ...}
        return value["bytes"] if value.get("bytes") is not None else value["path"]
    return value


def _storable(images: list) -> list:
    """Arrays as HxWx3 uint8 before evaluate's Arrow cache stores them: it stores no float array,
    and its refusal prints every pixel. A bad array is one ImageReadError naming its index and
    the first bad value (`load_rgb`)."""
    from banana100.errors import ImageReadError
    from banana100.imageio import load_rgb

    out = []
    for i, x in enumerate(images):
        try:  # an array is converted; anything not an image (None, a number) fails here, named by its index
            readable = isinstance(x, (str, os.PathLike, bytes, Image.Image, dict))
            out.append(x if readable else load_rgb(x))
        except ImageReadError as e:
            raise ImageReadError(f"images[{i}] {e}") from None
    return out


class _StoresImages:
    """add / add_batch of the image modules: arrays made storable first (`_storable`), and
    evaluate's format error as one line (it shows the whole input, pixel by pixel)."""

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of images (`images=[...]`) to score later with `compute()`."""
        if kwargs.get("images") is not None:
            kwargs["images"] = _storable(_as_list(kwargs["images"]))
        try:
            return super().add_batch(predictions=predictions, references=references, **kwargs)
        except ValueError as e:
            raise _one_line(self, e, kwargs.get("images")) from None

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one image (`images=...`) to score later with `compute()`."""
        if isinstance(kwargs.get("images"), np.ndarray):
            kwargs["images"] = _storable([kwargs["images"]])[0]
        try:
            return super().add(prediction=prediction, reference=reference, **kwargs)
        except ValueError as e:
            raise _one_line(self, e, kwargs.get("images")) from None


def _one_line(module, e: ValueError, images) -> ValueError:
    text = str(e).strip()
    if "\n" not in text:
        return e
    kinds = sorted({type(x).__name__ for x in _as_list(images)}) if images is not None else []
    return ValueError(f"{module.METRIC_NAME}: {text.splitlines()[0]} images must be PIL images, paths, bytes or "
                      f"HxWx3 arrays; got {', '.join(kinds) or 'none'}")


class IQAMetric(_StoresImages, evaluate.Metric, metaclass=abc.ABCMeta):
    """An NR-IQA metric from the metric table as an evaluate module; subclasses set METRIC_NAME."""

    @property
    @abc.abstractmethod
    def METRIC_NAME(self) -> str:
        """The metric's pyiqa id; subclasses override it with a plain class attribute."""

    def _info(self) -> evaluate.MetricInfo:
        from banana100.metrics.hub.cards import metric_description  # cards imports nothing from here

        spec = get_metric(self.METRIC_NAME)
        return evaluate.MetricInfo(
            description=metric_description(spec.name),
            citation=spec.citation,
            inputs_description=_INPUTS_DESCRIPTION,
            # decode=False: the fallback path hands us the stored bytes/path, which we read
            # with load_rgb exactly like the direct path (no EXIF rotation, pyiqa's policy).
            features=datasets.Features({"images": datasets.Image(decode=False)}),
            homepage="https://github.com/chaofengc/IQA-PyTorch",
            license="Apache-2.0 (module code); pyiqa: PolyForm Noncommercial 1.0.0; parameter files: their authors' licences",
            codebase_urls=["https://github.com/chaofengc/IQA-PyTorch"],
            reference_urls=[about.PAPER_URL] + [wf.download_url for wf in spec.all_files],
        )

    def _scorer(self, device: str | None, batch_size: int, backend: str | None, mode: str, half: bool,
                precision: str = "exact") -> MetricScorer:
        cache = self.__dict__.setdefault("_scorers", {})
        backend = get_metric(self.METRIC_NAME).check_backend(backend)
        key = (str(check_device(device)), int(batch_size), backend, mode, bool(half), precision)
        if key not in cache:
            cache[key] = MetricScorer(self.METRIC_NAME, device=key[0], batch_size=key[1], backend=backend, mode=mode,
                                      half=key[4], precision=precision)
        return cache[key]

    def compute(self, *, images=None, device=None, batch_size=8, backend=None, mode="pyiqa", precision="exact",
                half=False, max_image_pixels=None, components=False, references=None, **kwargs):
        """Score images with this metric.

        With `images=`, the images go straight to the scoring engine (no Arrow cache, no PNG
        re-encoding). Without it, the images stored by `add`/`add_batch` are scored.
        """
        if kwargs:
            raise TypeError(f"{self.METRIC_NAME}: unexpected keyword(s) {sorted(kwargs)}; "
                            "compute takes images, device, batch_size, backend, mode, precision, half, "
                            "max_image_pixels, components, references")
        if references is not None:
            return self._compute_relative(_as_list(images), references, device, batch_size, components)
        options = dict(device=device, batch_size=batch_size, backend=backend, mode=mode, precision=precision,
                       half=half, max_image_pixels=max_image_pixels, components=components)
        if images is not None and self.writer is None and self.num_process == 1:
            return self._compute(images=_storable(_as_list(images)), **options)  # a bad array named by index
        if images is not None:
            images = _as_list(images)
        # images added before (add/add_batch), or a distributed run: evaluate's own path
        return super().compute(images=images, **options)

    def _compute(self, images, device=None, batch_size=8, backend=None, mode="pyiqa", precision="exact", half=False,
                 max_image_pixels=None, components=False):
        images = [_from_arrow(x) for x in images]
        if not images:
            raise ValueError(f"{self.METRIC_NAME}: compute() got no images")
        scorer = self._scorer(device, batch_size, backend, mode, half, precision)
        scorer.max_image_pixels = max_image_pixels
        scored = scorer.measure_images(images)
        scores = scored.values(scorer.spec.display_name)
        out = {
            "metric": self.METRIC_NAME,
            "scores": scores,
            "mean": float(np.mean(scores)),
            "lower_better": get_metric(self.METRIC_NAME).lower_better,
        }
        if any(s is not None for s in scored.flat_shares):  # native hand-crafted metrics
            out["flat_share"] = scored.flat_shares
        if components:
            if not any(c is not None for c in scored.components):
                raise UsageError(f"{self.METRIC_NAME}: components=True is for a metric that explains its score "
                                 "(edit_damage); this one returns only the score")
            names = next(c for c in scored.components if c is not None)
            out["components"] = {n: [c[n] if c is not None else None for c in scored.components] for n in names}
        return out


    def _compute_relative(self, images, references, device, batch_size, components):
        from banana100.metrics.detector.relative import BARE, NAME, RelativeScorer

        if self.METRIC_NAME != BARE:
            raise UsageError(f"{self.METRIC_NAME}: references= is for edit_damage (the damage added since a reference)")
        if not images:
            raise ValueError(f"{self.METRIC_NAME}: compute() got no images")
        cache = self.__dict__.setdefault("_scorers", {})
        key = ("relative", str(check_device(device)), int(batch_size))
        if key not in cache:
            cache[key] = RelativeScorer(device=key[1], batch_size=key[2])
        scorer = cache[key]
        refs = references if isinstance(references, (str, os.PathLike, bytes, Image.Image)) or (
            isinstance(references, np.ndarray) and references.ndim == 3) else _as_list(references)
        scored = scorer.measure_against([_from_arrow(x) for x in images], refs)
        scores = scored.values(f" ({NAME})")
        out = {"metric": NAME, "scores": scores, "mean": float(np.mean(scores)), "lower_better": True}
        if components:
            out["components"] = {n: [c[n] for c in scored.components] for n in scored.components[0]}
        return out


_SENSITIVITY_INPUTS = """
Args:
    scores (list of float): one metric's score per image (NaN, inf or None = no score: a missing
        score, listed by name in `undefined_scores`, never used as a number).
    steps (list of int): the chain step of each image (0 = source).
    chain_ids (list of str): the chain of each image.
    lower_better (bool): required unless `metric` is given: True when a lower score means better
        quality (NIQE, BRISQUE, PIQE, IL-NIQE, PI), False when higher is better. Never guessed.
    metric (str): a pyiqa id of the metric table (e.g. "piqe"): the direction is taken from it.
    reference_step (int): step the changes are measured from (default 1).
    check_steps (tuple of int): steps that must all score worse (default (5, 10, 20)).
Returns:
    n_chains, n_passed, n_failed, n_incomplete, failure_rate, mean_rho, share_last_worse,
    incomplete_chains, n_undefined_scores, undefined_scores ({chain_id, step} of each missing
    score), per_chain (chain_id, passed, d_<k>, rho, missing_steps, undefined_steps,
    incomplete_reason, last_step, last_worse).
Example:
    >>> p = evaluate.load("metrics/banana100_sensitivity")
    >>> p.compute(scores=[5.0, 4.0, 3.0, 2.0], steps=[1, 5, 10, 20], chain_ids=["a"] * 4,
    ...           lower_better=False)["failure_rate"]
    0.0
"""


@evaluate.utils.file_utils.add_start_docstrings(protocol.__doc__, _SENSITIVITY_INPUTS)
class SensitivityProtocol(evaluate.Metric):
    """The paper's sensitivity protocol (`banana100.protocol.sensitivity`) as an evaluate
    metric: one score per image with its chain and step in, the protocol's summary out."""

    def _info(self):
        return evaluate.MetricInfo(
            description=protocol.__doc__,
            citation=about.CITATION,
            inputs_description=_SENSITIVITY_INPUTS,
            features=datasets.Features(
                {"scores": datasets.Value("float64"), "steps": datasets.Value("int64"), "chain_ids": datasets.Value("string")}
            ),
            homepage=about.CODE_REPOSITORY,
            license=f"{about.CODE_LICENCE} (module code)",
            codebase_urls=[about.CODE_REPOSITORY],
            reference_urls=[about.PAPER_URL],
        )

    def _compute(self, scores, steps, chain_ids, lower_better=None, reference_step=protocol.DEFAULT_REFERENCE_STEP,
                 check_steps=protocol.DEFAULT_CHECK_STEPS, metric=None):
        return protocol.sensitivity(scores, steps, chain_ids, lower_better=score_direction(lower_better, metric),
                                    reference_step=reference_step, check_steps=check_steps)


_VLM_INPUTS = """
Args:
    images: a list of images: file paths, PIL images, or HxWx3 uint8 arrays.
    device: "cpu", "cuda", "cuda:1", ...; default cuda when available (bf16 on GPU, float32 on CPU).
    batch_size: most images per generate() call; default None: as many as the free GPU memory
        holds (4 on CPU); a batch out of memory is halved.
    max_pixels: largest image area given to the model (default 4,194,304 = 2048 x 2048; the card
        says how it was chosen).
    keep_text: also return what the model answered for each image (`texts`).
    max_new_tokens: most tokens generated per image (default 64).
Returns:
    metric: "visualquality_r1".
    scores: one float per image (1-5), in input order.
    mean: the mean of the scores.
    lower_better: False.
    texts: (keep_text=True) the model's answer per image.
Raises:
    ScoreUndefinedError: some answers had no score (AnswerParseError per image in `error.errors`;
        the others are in `error.scores`): never a random score.
    WeightsNotFoundError: the checkpoint is not at hand (names the Hub repository).
"""


class VLMEvaluator(_StoresImages, evaluate.Metric, metaclass=abc.ABCMeta):
    """A language-model evaluator of the table (VisualQuality-R1) as an evaluate module."""

    @property
    @abc.abstractmethod
    def METRIC_NAME(self) -> str:
        """The table's id; subclasses override it with a plain class attribute."""

    def _info(self) -> evaluate.MetricInfo:
        spec = get_metric(self.METRIC_NAME)
        return evaluate.MetricInfo(
            description=f"{spec.display_name}: {spec.paper}", citation=spec.citation,
            inputs_description=_VLM_INPUTS,
            features=datasets.Features({"images": datasets.Image(decode=False)}),
            homepage=spec.original_code,
            license=f"Apache-2.0 (module code); weights: {spec.files[0].licence}",
            codebase_urls=[spec.original_code], reference_urls=[about.PAPER_URL, spec.files[0].download_url],
        )

    def use_model(self, model, processor) -> None:
        """Score with an already loaded Qwen2.5-VL model and processor (a fine-tune of your own,
        a model loaded with other options) instead of the checkpoint from the weights store."""
        self.__dict__["_given"] = (model, processor)
        self.__dict__["_scorers"] = {}

    def _scorer(self, device, batch_size, max_pixels, max_new_tokens):
        from banana100.metrics.vlm.scorer import VLMScorer

        cache = self.__dict__.setdefault("_scorers", {})
        # the same device check as the metric modules: a bad or absent device is one UsageError
        key = (str(check_device(device)), None if batch_size is None else int(batch_size), int(max_pixels),
               int(max_new_tokens))
        if key not in cache:
            model, processor = self.__dict__.get("_given", (None, None))
            cache[key] = VLMScorer(self.METRIC_NAME, device=key[0], batch_size=key[1], max_pixels=key[2],
                                   max_new_tokens=key[3], model=model, processor=processor)
        return cache[key]

    def compute(self, *, images=None, device=None, batch_size=None, max_pixels=None, keep_text=False,
                max_new_tokens=None, **kwargs):
        """Score images with this evaluator (straight to the scorer: no Arrow cache)."""
        from banana100.metrics.vlm.scorer import DEFAULT_MAX_NEW_TOKENS, DEFAULT_MAX_PIXELS

        if kwargs:
            raise TypeError(f"{self.METRIC_NAME}: unexpected keyword(s) {sorted(kwargs)}; compute takes images, "
                            "device, batch_size, max_pixels, keep_text, max_new_tokens")
        images = _as_list(images) if images is not None else []
        if not images:
            raise ValueError(f"{self.METRIC_NAME}: compute() got no images")
        scorer = self._scorer(device, batch_size, max_pixels or DEFAULT_MAX_PIXELS,
                              max_new_tokens or DEFAULT_MAX_NEW_TOKENS)
        scorer.keep_text = bool(keep_text)
        scored = scorer.measure_images([_from_arrow(x) for x in images])
        scores = scored.values(scorer.spec.display_name)
        out = {"metric": self.METRIC_NAME, "scores": scores, "mean": float(np.mean(scores)),
               "lower_better": get_metric(self.METRIC_NAME).lower_better}
        if keep_text:
            out["texts"] = scored.texts
        return out

    def _compute(self, images):  # evaluate's add/add_batch path: the same scoring
        return self.compute(images=images)
