"""The scorer contract: what every backend implements, and what `banana100 score`, the evaluate
modules, the Space and the report call.

A scorer scores decoded images (HxWx3 uint8 arrays) with one metric and returns a `Scores`
value: the scores and, per image, why an image has none (an `errors` entry) and what else the
backend tells (flat-window shares, the detector's components, a language model's answer). A
failing image never costs the others their scores. The backends: the engine's `MetricScorer`
(the metric table's native and pyiqa models, `pyiqa:<id>`), `VLMScorer` (VisualQuality-R1),
`RelativeScorer` / `SharedBareScorer` (edit_damage against a reference) and `ModuleScorer` (a
user's evaluate module).

    scored = scorer.measure(arrays, names)     # Scores: never raises for one image's failure
    scorer.score(["a.png", pil, array])        # [float, ...]: raises one error naming the failures

`isolating` is the one place where a call that fails is retried image by image, so that the
image at fault gets the error and the others their scores.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from banana100.errors import Banana100Error, ImageReadError, ImageTooSmallError, ScoreUndefinedError, UsageError
from banana100.imageio import ImageLike, describe, image_size, load_rgb
from banana100.metrics.table import MetricSpec

__all__ = ["Scorer", "Scores", "check_size", "failure_error", "image_names", "isolating"]


def check_size(spec: MetricSpec, image: np.ndarray | tuple[int, int], name: str) -> None:
    """Raise ImageTooSmallError when `image` (an array, or its (height, width)) is below the metric's minimum.

    The minimum is the metric's smallest meaningful size (the metric table's `min_size`: for the
    hand-crafted metrics measured by bench/metrics/bench_min_size.py), not just what pyiqa accepts.
    """
    h, w = image.shape[:2] if isinstance(image, np.ndarray) else image
    m = spec.min_size
    if h < m or w < m:
        raise ImageTooSmallError(
            f"{spec.display_name} needs at least {m}x{m} pixels; {name} is {w}x{h} (width x height)"
        )


@dataclass
class Scores:
    """One scoring call's results, per image in input order.

    `scores[i]` is None exactly when `errors` holds image i (why it has no score). `flat_shares`:
    the share of flat windows (the native hand-crafted metrics), `components`: what the score is
    made of (the edit_damage detector), `texts`: what a language model answered (kept on request);
    None where a backend has nothing to say."""

    scores: list[float | None]
    errors: dict[int, Banana100Error] = field(default_factory=dict)
    flat_shares: list[float | None] = field(default_factory=list)
    components: list[dict[str, float] | None] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.scores)
        for name in ("flat_shares", "components", "texts"):
            values = getattr(self, name)
            if not values:
                setattr(self, name, [None] * n)
            elif len(values) != n:
                raise ValueError(f"Scores: {len(values)} {name} for {n} scores")
        for i in self.errors:
            self.scores[i] = None

    def __len__(self) -> int:
        return len(self.scores)

    def values(self, label: str = "") -> list[float]:
        """The scores; when any image has none, one error naming each (ImageReadError if a file
        could not be read, else ScoreUndefinedError) that carries `scores` (None there) and
        `errors` ({index: error})."""
        if self.errors:
            raise failure_error(len(self.scores), self.errors, self.scores, label)
        return self.scores  # type: ignore[return-value]

    @classmethod
    def failed(cls, n: int, error: Banana100Error) -> Scores:
        """The Scores of n images that all failed with `error` (an image `isolating` blamed)."""
        return cls([None] * n, dict.fromkeys(range(n), error))

    @classmethod
    def gather(cls, n: int, parts: Sequence[tuple[Sequence[int], Scores]]) -> Scores:
        """The Scores of n images from parts that each scored some of them (indices into the n)."""
        out = cls([None] * n)
        for indices, part in parts:
            if len(indices) != len(part):
                raise ValueError(f"Scores.gather: {len(part)} results for {len(indices)} images")
            for k, i in enumerate(indices):
                out.scores[i] = part.scores[k]
                out.flat_shares[i], out.components[i], out.texts[i] = (
                    part.flat_shares[k], part.components[k], part.texts[k])
                if k in part.errors:
                    out.errors[i] = part.errors[k]
        return out


def failure_error(images: int, failed: dict[int, Banana100Error], scores: list, what: str = "") -> Banana100Error:
    """One error for the images of a call that could not be scored, after the others were.

    ImageReadError when any file could not be read, else ScoreUndefinedError; it carries
    `scores` (None for each failed image) and `errors` ({index: that image's error}).
    """
    names = "; ".join(str(failed[i]) for i in sorted(failed))
    unread = any(isinstance(e, ImageReadError) for e in failed.values())
    undefined = any(not isinstance(e, ImageReadError) for e in failed.values())
    verb = ("could not be decoded or scored" if unread and undefined else
            "could not be decoded" if unread else f"have no {what} score".replace("  ", " "))
    cls = ImageReadError if unread else ScoreUndefinedError
    error = cls(f"{len(failed)} of {images} images {verb} ({names}); the others were scored: see this error's `scores`")
    error.scores = [None if i in failed else s for i, s in enumerate(scores)]
    error.errors = dict(sorted(failed.items()))
    return error


R = TypeVar("R")


def isolating(run: Callable[[list[int]], R], indices: list[int],
              blame: Callable[[int, Exception], Banana100Error | None]) -> list[tuple[list[int], R | Banana100Error]]:
    """`run(indices)`, and when it raises an error that `blame(i, error)` lays on an image (not
    None: a failure of that image, not of the run), `run` again image by image: the image that
    still fails alone gets the error `blame` made of it, the others their results. Returns
    (indices, result or error) pairs covering `indices` in order; an error `blame` does not lay on
    an image (out of memory, a bug) propagates."""
    try:
        return [(indices, run(indices))]
    except Exception as e:  # noqa: BLE001 - `blame` decides what is an image's fault
        blamed = blame(indices[0], e)
        if blamed is None:
            raise
        if len(indices) == 1:
            return [(indices, blamed)]
    return [pair for i in indices for pair in isolating(run, [i], blame)]


def image_names(images: Sequence[Any]) -> list[str]:
    """How each image of a call is named in messages: a path as written, anything else by its index."""
    import os

    return [describe(img) if isinstance(img, (str, os.PathLike)) else f"image {i} {describe(img)}"
            for i, img in enumerate(images)]


class Scorer(abc.ABC):
    """A metric's scorer. Subclasses set `spec`, `device` (a torch.device), `batch_size`, and
    `backend`, `mode`, `precision` (what the scores file records of how a score was made), and
    implement `measure`."""

    spec: MetricSpec
    backend: str = "native"
    mode: str = "pyiqa"
    precision: str = "exact"
    batch_size: int = 8
    device: Any = None
    #: `measure_uploaded` exists: several metrics share one upload of a batch to the device
    shares_uploads: ClassVar[bool] = False
    #: measures against each image's reference (`records` name it): the chain's step 0, --reference
    needs_reference: ClassVar[bool] = False
    #: the largest image area read from a file (a guard against decompression bombs); None: the default
    max_image_pixels: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def largest_batch(self) -> int:
        """The most images one forward takes (`banana100 score` hands over at least this many a call)."""
        return self.batch_size

    @abc.abstractmethod
    def measure(self, arrays: Sequence[np.ndarray], names: Sequence[str], records: Sequence[dict] | None = None
                ) -> Scores:
        """Score HxWx3 uint8 arrays (named in messages by `names`; `records`: each image's manifest
        record, for a scorer that finds its reference there). An image below the metric's minimum
        size, or with no defined score, is an `errors` entry; the others are scored."""

    def measure_large_enough(self, arrays: Sequence[np.ndarray], names: Sequence[str],
                             run: Callable[[list[np.ndarray], list[str]], Scores]) -> Scores:
        """`run(arrays, names)` on the images of at least the metric's minimum size, the scores in input order; each
        smaller image an `errors` entry (ImageTooSmallError), so that one small image costs no other its score."""
        names = list(names)
        small: dict[int, Banana100Error] = {}
        for i, (a, name) in enumerate(zip(arrays, names, strict=True)):
            try:
                check_size(self.spec, a, name)
            except ImageTooSmallError as e:
                small[i] = e
        ok = [i for i in range(len(names)) if i not in small]
        out = Scores.gather(len(names), [(ok, run([arrays[i] for i in ok], [names[i] for i in ok]))])
        out.errors.update(small)
        return out

    def measure_images(self, images: Sequence[ImageLike]) -> Scores:
        """`measure` of paths, bytes, PIL images or arrays. Every file's size is checked by its
        header before any work (a missing, unreadable or too small file raises at once); a file
        whose pixel data turn out corrupt is an `errors` entry."""
        images, names = list(images), image_names(images)
        decoded: dict[int, np.ndarray] = {}
        errors: dict[int, Banana100Error] = {}
        for i, img in enumerate(images):
            size = image_size(img, self.max_image_pixels) if isinstance(img, (str, bytes)) or hasattr(
                img, "__fspath__") else None
            if size is None:
                decoded[i] = load_rgb(img)
                size = decoded[i].shape[:2]
            check_size(self.spec, size, names[i])
        for i, img in enumerate(images):
            if i not in decoded:
                try:
                    decoded[i] = load_rgb(img, self.max_image_pixels)
                except ImageReadError as e:
                    errors[i] = e
        ok = [i for i in range(len(images)) if i not in errors]
        scored = self.measure([decoded[i] for i in ok], [names[i] for i in ok])
        out = Scores.gather(len(images), [(ok, scored)])
        out.errors.update(errors)
        return out

    def score(self, images: Sequence[ImageLike]) -> list[float]:
        """Scores of `images` (paths, bytes, PIL images or arrays), as Python floats in input
        order; see `measure_images`. When an image has no score, the others are scored and one
        error names each failure (`Scores.values`)."""
        return self.measure_images(images).values(self.spec.display_name)

    def score_arrays(self, arrays: Sequence[np.ndarray], names: Sequence[str] | None = None) -> list[float]:
        """Scores of HxWx3 uint8 arrays in input order; failures as in `score`."""
        arrays = list(arrays)
        if names is None:
            names = [f"array {i} {describe(a)}" for i, a in enumerate(arrays)]
        elif len(names) != len(arrays):
            raise UsageError(f"score_arrays: {len(names)} names for {len(arrays)} arrays")
        for a, name in zip(arrays, names, strict=True):
            if not (isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3):
                raise ImageReadError(f"{name}: {describe(a)}; score_arrays takes HxWx3 uint8 arrays")
            check_size(self.spec, a, name)
        arrays = [np.ascontiguousarray(a) for a in arrays]
        return self.measure(arrays, list(names)).values(self.spec.display_name)
