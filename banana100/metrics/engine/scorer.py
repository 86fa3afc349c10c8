"""The scoring engine: one model per metric, fed batches of same-size images.

A model is either a pyiqa arch or, for the hand-crafted metrics, the batched torch code of
`banana100.metrics.native` (the default there; `backend="pyiqa"` selects pyiqa). Images are read with
`imageio.load_rgb` (pyiqa's PIL `.convert("RGB")` policy) and turned into float tensors exactly
as pyiqa turns a file into a tensor (`TF.to_tensor`: uint8 / 255 in float32); a pyiqa model is
built with the local path of its parameter file (from the weights store), so pyiqa never tries
to download anything.

    scorer = MetricScorer("niqe")              # cuda when available, else cpu
    scorer.score(["a.png", pil_image, array])  # -> [float, float, float], input order

Images of the same size are stacked into batches of `batch_size` when the metric is batchable
(native modules always; pyiqa archs when the table says their batched scores equal their
one-at-a-time scores).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from banana100.errors import Banana100Error, ImageTooSmallError, ScoreUndefinedError, UsageError
from banana100.imageio import ImageLike, image_size, load_rgb
from banana100.metrics import weights
from banana100.metrics.engine import fastpaths, feed
from banana100.metrics.engine.contract import Scorer, Scores, check_size, image_names, isolating
from banana100.metrics.native import MODES
from banana100.metrics.precision import autocast_dtype, check_precision, float32_precision
from banana100.metrics.table import DEFAULT_BATCH_SIZE, MetricSpec, get_metric
from banana100.metrics.engine.upload import Uploaded, Uploader, to_float, to_tensor

__all__ = ["DEFAULT_BATCH_SIZE", "MetricScorer", "check_device", "check_size", "default_device", "keep_freed_memory",
           "to_tensor"]


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def keep_freed_memory() -> bool:
    """Make glibc keep freed memory for the next image instead of handing it back to the OS.

    By default glibc unmaps large freed blocks and trims the heap top, so every image's
    multi-megabyte tensors are page-faulted in afresh: on CPU that was most of the time spent
    scoring with the hand-crafted metrics (bench/engine/bench_malloc.py). With these settings only
    blocks over 256 MiB (a batch of 2K images) are mapped separately, and up to 1 GiB of free
    heap is kept for reuse. Process-wide (forked
    decode workers inherit it), once per process; set BANANA100_MALLOC_TUNING=0 to leave the
    allocator alone. Returns whether the settings were applied (False off glibc).
    """
    if os.environ.get("BANANA100_MALLOC_TUNING", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows): nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # musl's mallopt is a stub returning 0
    return mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and mallopt(_M_MMAP_THRESHOLD, 256 << 20) == 1


def default_device() -> str:
    """'cuda' when a GPU is visible, else 'cpu'."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device) -> torch.device:
    """`device` ("cpu", "cuda", "cuda:N", a torch.device; None: `default_device()`) as a torch
    device this machine has; UsageError naming the value otherwise (a typo, a GPU index that
    is not there, cuda on a machine without one)."""
    if device is None:
        return torch.device(default_device())
    try:
        dev = device if isinstance(device, torch.device) else torch.device(str(device).strip())
    except (RuntimeError, ValueError, TypeError):
        raise UsageError(f"device {device!r}: not a device (expected cpu, cuda or cuda:N)") from None
    if str(device).strip() == "":
        raise UsageError("device '': not a device (expected cpu, cuda or cuda:N)")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"device {device!r}: no CUDA GPU is visible on this machine; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s) "
                             f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise UsageError(f"device {device!r}: Apple's MPS is not available on this machine; use --device cpu")
    elif dev.type != "cpu":
        raise UsageError(f"device {device!r}: banana100 scores on cpu, cuda or cuda:N, not {dev.type}")
    return dev


class MetricScorer(Scorer):
    """Scores images with one metric of the table (the scorer contract: `contract.Scorer`).

    Args:
        metric: pyiqa id from the metric table (`banana100.metrics.table`).
        device: "cpu", "cuda", "cuda:1"...; default cuda when available.
        batch_size: most images per forward pass (same-size images only; batchable metrics);
            None: DEFAULT_BATCH_SIZE (8).
        backend: "native" (the batched torch code of `banana100.metrics.native`, the default for the
            hand-crafted metrics) or "pyiqa"; None: the metric's default.
        mode: "pyiqa" (pyiqa's scores, the default) or "official" (the original releases'
            scores; native backend only).
        half: run the forward pass under float16 autocast. Only for metrics whose table entry
            has a measured `half_tolerance` (bench/gpu/gpu_check.py --half); refused otherwise.
        precision: "exact" (the default: IEEE float32, TF32 off whatever torch's global flags)
            or "fast" (TF32 allowed; the deep metrics also under bfloat16 autocast on a GPU);
            its measured error per metric is on the card (`banana100.metrics.precision`).
        max_image_pixels: the largest width x height read from a file (a guard against
            decompression bombs); None: `banana100.imageio.MAX_IMAGE_PIXELS` (89,478,485 unless
            BANANA100_MAX_IMAGE_PIXELS says otherwise).

    Raises WeightsNotFoundError (naming the file and where to put it) when the metric's
    parameter files are missing, UnknownMetricError for a name not in the table.
    """

    shares_uploads = True  # `measure_uploaded`: several metrics score one upload of a batch

    def __init__(self, metric: str, device: str | torch.device | None = None,
                 batch_size: int | None = DEFAULT_BATCH_SIZE,
                 backend: str | None = None, mode: str = "pyiqa", half: bool = False,
                 max_image_pixels: int | None = None, precision: str = "exact"):
        self._setup(metric, device, batch_size)
        self.max_image_pixels = max_image_pixels
        self.precision = check_precision(precision)
        if half:
            self.allow_half()
        self.backend = self.spec.check_backend(backend)
        if mode not in MODES:
            raise UsageError(f"{self.spec.name}: mode must be one of {MODES}, got {mode!r}")
        if mode == "official" and self.backend != "native":
            raise UsageError(f"{self.spec.name}: mode='official' needs the native backend "
                             f"(this metric's backends: {', '.join(self.spec.backends)})")
        self.mode = mode
        if self.backend == "pyiqa":  # before the weights: without pyiqa they are of no use
            from banana100.extras import require_extra

            require_extra("deep", f"the {self.spec.name} metric (pyiqa backend)")
        pairs = weights.resolved_files(self.spec.name, backend=self.backend)
        if self.backend == "native":
            from banana100.metrics import native

            self.model = native.build(self.spec.name, {wf.filename: path for wf, path in pairs}, mode=mode)
            self.model.to(self.device)
            self.model.allow_tf32 = self.precision == "fast"  # read by the native forward's guard
            return
        import pyiqa  # heavy import, only when a pyiqa scorer is built

        kwargs = {}
        if pairs and self.spec.path_kwarg:
            kwargs[self.spec.path_kwarg] = str(pairs[0][1])
            pairs = pairs[1:]
        with weights.files_in_place(pairs):
            self.model = fastpaths.speed_up(pyiqa.create_metric(self.spec.name, device=self.device, **kwargs))

    def _setup(self, metric: str | MetricSpec, device, batch_size: int | None) -> None:
        # a MetricSpec: a metric outside the table (`pyiqa:<id>`, built by banana100.metrics.resolve)
        self.spec = metric if isinstance(metric, MetricSpec) else get_metric(metric)
        self.backend, self.mode, self.half, self.precision = "pyiqa", "pyiqa", False, "exact"
        self._uploader: Uploader | None = None
        self.device = check_device(device)
        if batch_size is None:
            batch_size = DEFAULT_BATCH_SIZE
        if int(batch_size) < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.decode_workers = min(4, os.cpu_count() or 1)  # threads decoding images in score()
        self.max_image_pixels: int | None = None  # None: banana100.imageio.MAX_IMAGE_PIXELS
        keep_freed_memory()

    def allow_half(self, measured: bool = True) -> None:
        """Score under float16 autocast from now on.

        `measured=False` skips the table's check; only bench/gpu/gpu_check.py uses it, to measure
        the tolerance that the table then states.
        """
        if measured and self.spec.half_tolerance is None:
            raise UsageError(
                f"{self.spec.name}: half precision has not been validated for this metric (no half_tolerance "
                "in the metric table); measure it with `python -m bench.gpu.gpu_check --half` on a GPU first"
            )
        self.half = True

    @classmethod
    def from_model(cls, metric: str | MetricSpec, model: torch.nn.Module, device=None,
                   batch_size: int | None = DEFAULT_BATCH_SIZE, precision: str = "exact") -> "MetricScorer":
        """A scorer around an already built pyiqa model (tests build archs with random weights;
        the resolver builds `pyiqa:<id>` metrics outside the table)."""
        self = cls.__new__(cls)
        self._setup(metric, device, batch_size)
        self.precision = check_precision(precision)
        self.model = fastpaths.speed_up(model).to(self.device)
        return self

    @property
    def uploader(self) -> Uploader:
        """What uploads this scorer's batches (one per device; `score --metrics` shares one)."""
        if self._uploader is None or self._uploader.device != self.device:
            self._uploader = Uploader(self.device)
        return self._uploader

    def __repr__(self) -> str:
        return (f"MetricScorer({self.spec.name!r}, device={str(self.device)!r}, batch_size={self.batch_size}, "
                f"backend={self.backend!r}, mode={self.mode!r}{', half=True' if self.half else ''}"
                f"{', precision=' + repr(self.precision) if self.precision != 'exact' else ''})")

    @property
    def batchable(self) -> bool:
        """Native modules always batch (scores do not depend on the batch); pyiqa archs per the table."""
        return self.backend == "native" or self.spec.batchable

    @property
    def largest_batch(self) -> int:
        """The most images one forward takes (`banana100 score` hands over at least this many a call)."""
        return self.batch_size if self.batchable else 1

    @property
    def name(self) -> str:
        return self.spec.name

    def measure_images(self, images: Sequence[ImageLike]) -> Scores:
        """`measure` of paths, bytes, PIL images or arrays (`Scorer.measure_images`).

        Every image's size is checked before any scoring starts (files by their header: a
        missing, unreadable or too small file fails at once). Files are then decoded in
        `decode_workers` threads a chunk ahead of the model (`feed.measure_files`), so decoding
        overlaps scoring and only those chunks are held in memory. A file whose pixel data turn out
        corrupt, or an image the metric has no score for (a uniform image for a metric whose table
        entry says `uniform="undefined"`, a NaN result), is an `errors` entry; the others are scored.
        """
        images = list(images)
        names = image_names(images)
        for i, img in enumerate(images):
            if isinstance(img, (str, os.PathLike, bytes)):
                size = image_size(img, self.max_image_pixels)
            else:  # arrays and PIL images are in memory already: convert them now
                images[i] = load_rgb(img)
                size = images[i].shape[:2]
            check_size(self.spec, size, names[i])
        return feed.measure_files(self, images, names, self.decode_workers, self.max_image_pixels)

    def measure(self, arrays: Sequence[np.ndarray], names: Sequence[str], records=None) -> Scores:
        """Scores of HxWx3 uint8 arrays (`Scorer.measure`): same-size groups uploaded once, a chunk
        ahead of the model (`feed.measure_arrays`); an image below the metric's minimum size is an
        `errors` entry (ImageTooSmallError), as is one with no defined score."""
        return self.measure_large_enough(arrays, names, lambda a, n: feed.measure_arrays(self, a, n))

    def measure_uploaded(self, batch: Uploaded, names: Sequence[str]) -> Scores:
        """Scores of a batch of same-size images already on this scorer's device
        (`banana100.metrics.engine.upload.Uploader.upload`), in order: the entry through which several
        metrics share one upload (`feed.measure_chunk`). Images below the metric's minimum size
        are `errors` entries; other failures as in `measure`."""
        names = list(names)
        if len(names) != len(batch):
            raise UsageError(f"measure_uploaded: {len(names)} names for {len(batch)} images")
        if batch.pixels.device.type != self.device.type:
            raise UsageError(f"measure_uploaded: a batch on {batch.pixels.device} for a scorer on {self.device}")
        size = tuple(batch.pixels.shape[1:3])
        try:
            check_size(self.spec, size, names[0])
        except ImageTooSmallError:  # the whole batch has that size: each image named
            return Scores([None] * len(names), {i: self._too_small(size, name) for i, name in enumerate(names)})
        if self.spec.uniform != "scored":
            batch.colours()  # once for the whole batch (and every metric that shares it)
        chunks = self._chunks([size] * len(names))
        return self._measure_batches(((idx, batch.take(idx)) for idx in chunks), len(names), names)

    def _too_small(self, size: tuple[int, int], name: str) -> Banana100Error:
        try:
            check_size(self.spec, size, name)
        except ImageTooSmallError as e:
            return e
        raise AssertionError(f"{name} is not too small")  # pragma: no cover

    def _measure_batches(self, batches, n: int, names: list[str]) -> Scores:
        """Score (indices, Uploaded batch) pairs; the scores stay on the device until every batch
        is queued, then come back at once.

        A uniform image gets the metric's documented value, or ScoreUndefinedError, without
        running the model (the table's `uniform`); a NaN or infinite score, or a linear-algebra
        failure of one image (pyiqa's NIQE / IL-NIQE on degenerate images), is ScoreUndefinedError.
        """
        failed: dict[int, Banana100Error] = {}
        scores: list[float | None] = [None] * n
        shares: list[float | None] = [None] * n
        components: list[dict[str, float] | None] = [None] * n
        label = self.spec.display_name
        queued: list[tuple[list[int], list[_Out]]] = []
        for idx, batch in batches:
            colours = batch.colours() if self.spec.uniform != "scored" else [None] * len(idx)
            run = []
            for j, (i, colour) in enumerate(zip(idx, colours, strict=True)):
                if colour is None:
                    run.append(j)
                elif self.spec.uniform == "undefined":
                    failed[i] = ScoreUndefinedError(
                        f"{names[i]}: {label} is undefined for a uniform image (every pixel is RGB {colour}): "
                        "its statistics need some variation in the image")
                else:
                    scores[i] = float(self.spec.uniform)
            queued.append((idx, self._forward_isolating(batch, run, [names[idx[j]] for j in run], failed, idx)))
            self.uploader.queued()
        for idx, outs in queued:  # one transfer per forward, after all of them are queued
            for out in outs:
                values = out.scores.cpu().tolist()
                share = out.shares.cpu().tolist() if out.shares is not None else [None] * len(values)
                comps = {k: v.cpu().tolist() for k, v in (out.components or {}).items()}
                for k, (j, s) in enumerate(zip(out.positions, values, strict=True)):
                    i = idx[j]
                    shares[i] = share[k]
                    components[i] = {name: float(v[k]) for name, v in comps.items()} or None
                    if math.isfinite(s):
                        scores[i] = float(s)
                    else:
                        failed[i] = ScoreUndefinedError(
                            f"{names[i]}: {label} gave {s} for this image (no defined score; a nearly "
                            "uniform image, or too little variation for the metric's statistics)")
        if self.backend == "native" or any(s is not None for s in shares):
            from banana100.metrics.native import warn_if_flat

            warn_if_flat(self.spec.name, shares, names)
        return Scores(scores, failed, shares, components)

    def _forward_isolating(self, batch: Uploaded, run: list[int], names: list[str], failed: dict,
                           idx: list[int]) -> list["_Out"]:
        """The forwards of batch[run]; a linear-algebra failure is retried image by image
        (`contract.isolating`), and an image that fails alone is recorded in `failed`; any other
        error propagates."""
        if not run:
            return []
        name_of = dict(zip(run, names, strict=True))

        def blame(j: int, e: Exception) -> Banana100Error | None:
            if not isinstance(e, torch.linalg.LinAlgError):
                return None
            return ScoreUndefinedError(
                f"{name_of[j]}: {self.spec.display_name} failed on this image ({type(e).__name__.lstrip('_')}: "
                f"{str(e).splitlines()[0]}); a nearly uniform image has no defined score")

        outs = []
        for positions, got in isolating(lambda r: self._forward_backing_off(batch, r), run, blame):
            if isinstance(got, Banana100Error):
                failed[idx[positions[0]]] = got
            else:
                outs += got
        return outs

    def _chunks(self, sizes: Sequence[tuple[int, int]]) -> list[list[int]]:
        """Index lists to score together: same-size groups cut to batch_size, or singles."""
        if not self.batchable or self.batch_size == 1:
            return [[i] for i in range(len(sizes))]
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, size in enumerate(sizes):
            groups[tuple(size)].append(i)
        bs = self.batch_size
        return [idx[k : k + bs] for idx in groups.values() for k in range(0, len(idx), bs)]

    def _forward(self, x: torch.Tensor) -> list[float]:
        """The model's scores of a float batch x (Bx3xHxW in [0, 1]), waited for (bench scripts)."""
        return [float(v) for v in self._forward_device(x.to(self.device), list(range(x.shape[0]))).scores.cpu().tolist()]

    def _forward_device(self, x: torch.Tensor, positions: list[int]) -> "_Out":
        """The forward of x (on the device) in this scorer's precision; results left on the device."""
        dtype = autocast_dtype(self.precision, self.device, self.half) if self.backend != "native" else None
        autocast = torch.autocast(self.device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
        # a native model holds TF32 off in its own forward (`native.build`); a pyiqa model here
        precision = float32_precision(self.precision == "fast") if self.backend != "native" else contextlib.nullcontext()
        with torch.no_grad(), precision, autocast:
            out = self.model(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if out.dtype in (torch.float16, torch.bfloat16):  # under autocast; native scores stay float64
            out = out.float()
        out = out.detach().reshape(-1)
        if out.numel() != x.shape[0]:
            raise RuntimeError(f"{self.spec.name}: expected {x.shape[0]} scores, got shape {tuple(out.shape)}")
        share = getattr(self.model, "last_flat_share", None)  # native modules: flat-window share
        share = share.detach() if share is not None and share.numel() == x.shape[0] else None
        comps = getattr(self.model, "last_components", None) or {}
        comps = {k: v.detach() for k, v in comps.items() if v.numel() == x.shape[0]}
        return _Out(positions, out, share, comps or None)

    def _forward_backing_off(self, batch: Uploaded, run: list[int]) -> list["_Out"]:
        """Score the images `run` of one same-size batch; on out-of-memory, halve the batch (and
        keep it halved). A single image that still does not fit raises the out-of-memory error.
        """
        x = None
        try:
            x = to_float(batch.take(run).pixels)
            return [self._forward_device(x, run)]
        except Exception as e:  # noqa: BLE001 - only out-of-memory is handled here
            if not is_out_of_memory(e) or len(run) == 1:
                raise
        del x
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        half = max(1, len(run) // 2)
        if half < self.batch_size:
            warnings.warn(f"{self.spec.name}: out of memory with {len(run)} images a batch; "
                          f"batch_size lowered to {half}", RuntimeWarning, stacklevel=3)
            self.batch_size = half
        return self._forward_backing_off(batch, run[:half]) + self._forward_backing_off(batch, run[half:])


class _Out(NamedTuple):
    """One forward's results, still on the device: the images' places in their batch, their
    scores (None: the image failed, recorded as such), flat shares, components."""

    positions: list[int]
    scores: torch.Tensor | None
    shares: torch.Tensor | None
    components: dict[str, torch.Tensor] | None


def is_out_of_memory(e: BaseException) -> bool:
    """True for CUDA (or other accelerator / host) out-of-memory errors."""
    if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()
