"""The scoring engine: one model per metric, fed batches of same-size images.

A model is either a pyiqa arch or, for the hand-crafted metrics, the batched torch code of
`banana100.native` (the default there; `backend="pyiqa"` selects pyiqa). Images are read with
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

import os
import warnings
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from . import weights
from .errors import ImageReadError, ImageTooSmallError
from .imageio import ImageLike, describe, load_rgb
from .native import MODES
from .registry import MetricSpec, WeightFile, get_metric


def default_device() -> str:
    """'cuda' when a GPU is visible, else 'cpu'."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """HxWx3 uint8 -> 3xHxW float32 in [0, 1]; bit-for-bit what `TF.to_tensor` gives pyiqa."""
    if not rgb.flags.writeable:  # arrays from PIL are read-only; torch warns on those
        rgb = rgb.copy()
    return torch.from_numpy(rgb).permute(2, 0, 1).contiguous().to(torch.float32).div(255)


def check_size(spec: MetricSpec, rgb: np.ndarray, name: str) -> None:
    """Raise ImageTooSmallError when `rgb` is below the metric's minimum height or width."""
    h, w = rgb.shape[:2]
    m = spec.min_size
    if h < m or w < m:
        raise ImageTooSmallError(
            f"{spec.display_name} needs at least {m}x{m} pixels; {name} is {w}x{h} (width x height)"
        )


def _link_into(folder: Path, paths: Sequence[Path]) -> None:
    """Link (or copy) files into `folder` unless a file of that name is already there."""
    if not paths:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for p in paths:
        target = folder / p.name
        if target.exists():
            continue
        if target.is_symlink():  # a dangling link from an earlier run
            target.unlink()
        try:
            os.symlink(Path(p).resolve(), target)
        except OSError:
            import shutil

            shutil.copyfile(p, target)


def _stage_in_pyiqa_cache(paths: Sequence[Path]) -> None:
    """Link files into pyiqa's download folder, for archs that only look there.

    Only for files a pyiqa arch cannot take as a path argument (metric without `path_kwarg`,
    or a second file); pyiqa would download them to the same place itself.
    """
    if not paths:
        return
    from pyiqa.utils.download_util import DEFAULT_CACHE_DIR

    _link_into(Path(DEFAULT_CACHE_DIR), paths)


@contextmanager
def files_in_place(pairs: Sequence[tuple[WeightFile, Path]]):
    """Put each (table file, local path) where the library that reads it will look, for a build.

    pyiqa, torchvision and CLIP files are linked into their caches under `torch.hub.get_dir()`
    (the places those libraries download to), renamed to the name they expect. timm backbones
    and the Q-Align snapshot are handed over by patching, only while the block runs:
    `timm.create_model(..., pretrained=True)` gets `pretrained_cfg_overlay={"file": path}`, and
    Q-Align's `from_pretrained("q-future/one-align")` gets the local folder. Not thread-safe:
    build scorers from one thread.
    """
    from contextlib import ExitStack
    from unittest import mock

    by_cache: dict[str, list[Path]] = defaultdict(list)
    timm_files: dict[str, Path] = {}
    snapshots: dict[str, Path] = {}
    for wf, path in pairs:
        if wf.snapshot:
            snapshots[wf.repo_id] = path
        elif wf.timm_name:
            timm_files[wf.timm_name] = path
        else:
            by_cache[wf.cache].append(path)
    if by_cache.get("pyiqa"):
        _stage_in_pyiqa_cache(by_cache["pyiqa"])
    for cache in ("torch", "clip"):
        if by_cache.get(cache):
            _link_into(weights.cache_dir(WeightFile("x", cache=cache)), by_cache[cache])
    with ExitStack() as stack:
        if timm_files:
            import timm

            original = timm.create_model

            def create_model(model_name, pretrained=False, **kwargs):
                if pretrained and model_name in timm_files:
                    overlay = dict(kwargs.pop("pretrained_cfg_overlay", None) or {})
                    overlay["file"] = str(timm_files[model_name])
                    kwargs["pretrained_cfg_overlay"] = overlay
                return original(model_name, pretrained=pretrained, **kwargs)

            stack.enter_context(mock.patch.object(timm, "create_model", create_model))
        if snapshots:
            from pyiqa.archs import qalign_arch

            for cls_name in ("MPLUGOwl2LlamaForCausalLM", "CLIPImageProcessor"):
                cls = getattr(qalign_arch, cls_name)
                orig = cls.from_pretrained

                def from_pretrained(name, *args, _orig=orig, **kwargs):
                    return _orig(str(snapshots.get(str(name), name)), *args, **kwargs)

                stack.enter_context(mock.patch.object(cls, "from_pretrained", from_pretrained))
        yield


class MetricScorer:
    """Scores images with one metric of the table.

    Args:
        metric: pyiqa id from the metric table (`banana100.registry`).
        device: "cpu", "cuda", "cuda:1"...; default cuda when available.
        batch_size: most images per forward pass (same-size images only; batchable metrics).
        backend: "native" (the batched torch code of `banana100.native`, the default for the
            hand-crafted metrics) or "pyiqa"; None: the metric's default.
        mode: "pyiqa" (pyiqa's scores, the default) or "official" (the original releases'
            scores; native backend only).
        half: run the forward pass under float16 autocast. Only for metrics whose table entry
            has a measured `half_tolerance` (bench/gpu_check.py --half); refused otherwise.

    Raises WeightsNotFoundError (naming the file and where to put it) when the metric's
    parameter files are missing, UnknownMetricError for a name not in the table.
    """

    def __init__(self, metric: str, device: str | torch.device | None = None, batch_size: int = 8,
                 backend: str | None = None, mode: str = "pyiqa", half: bool = False):
        self._setup(metric, device, batch_size)
        if half:
            self.allow_half()
        self.backend = self.spec.check_backend(backend)
        if mode not in MODES:
            raise ValueError(f"{self.spec.name}: mode must be one of {MODES}, got {mode!r}")
        if mode == "official" and self.backend != "native":
            raise ValueError(f"{self.spec.name}: mode='official' needs the native backend "
                             f"(this metric's backends: {', '.join(self.spec.backends)})")
        self.mode = mode
        pairs = weights.resolved_files(self.spec.name, backend=self.backend)
        if self.backend == "native":
            from . import native

            self.model = native.build(self.spec.name, {wf.filename: path for wf, path in pairs}, mode=mode)
            self.model.to(self.device)
            return
        import pyiqa  # heavy import, only when a pyiqa scorer is built

        kwargs = dict(self.spec.pyiqa_kwargs)
        if pairs and self.spec.path_kwarg:
            kwargs[self.spec.path_kwarg] = str(pairs[0][1])
            pairs = pairs[1:]
        with files_in_place(pairs):
            self.model = pyiqa.create_metric(self.spec.name, device=self.device, **kwargs)

    def _setup(self, metric: str, device, batch_size: int) -> None:
        self.spec = get_metric(metric)
        self.backend, self.mode, self.half = "pyiqa", "pyiqa", False
        self.device = torch.device(device if device is not None else default_device())
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.decode_workers = min(4, os.cpu_count() or 1)  # threads decoding images in score()

    def allow_half(self, measured: bool = True) -> None:
        """Score under float16 autocast from now on.

        `measured=False` skips the table's check; only bench/gpu_check.py uses it, to measure
        the tolerance that the table then states.
        """
        if measured and self.spec.half_tolerance is None:
            raise ValueError(
                f"{self.spec.name}: half precision has not been validated for this metric (no half_tolerance "
                "in the metric table); measure it with `python bench/gpu_check.py --half` on a GPU first"
            )
        self.half = True

    @classmethod
    def from_model(cls, metric: str, model: torch.nn.Module, device=None, batch_size: int = 8) -> "MetricScorer":
        """A scorer around an already built pyiqa model (tests build archs with random weights)."""
        self = cls.__new__(cls)
        self._setup(metric, device, batch_size)
        self.model = model.to(self.device)
        return self

    def __repr__(self) -> str:
        return (f"MetricScorer({self.spec.name!r}, device={str(self.device)!r}, batch_size={self.batch_size}, "
                f"backend={self.backend!r}, mode={self.mode!r}{', half=True' if self.half else ''})")

    @property
    def batchable(self) -> bool:
        """Native modules always batch (scores do not depend on the batch); pyiqa archs per the table."""
        return self.backend == "native" or self.spec.batchable

    @property
    def name(self) -> str:
        return self.spec.name

    def score(self, images: Sequence[ImageLike]) -> list[float]:
        """Scores of `images` (paths, bytes, PIL images or arrays), as Python floats in input order.

        Every image is read and size-checked before any scoring starts.
        """
        images = list(images)
        if len(images) > 1 and self.decode_workers > 1:  # PIL decodes with the GIL released
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(self.decode_workers, len(images))) as pool:
                rgbs = list(pool.map(load_rgb, images))
        else:
            rgbs = [load_rgb(img) for img in images]
        for img, rgb in zip(images, rgbs):
            check_size(self.spec, rgb, describe(img))
        return self._score(rgbs)

    def score_arrays(self, arrays: Sequence[np.ndarray]) -> list[float]:
        """Scores of HxWx3 uint8 arrays (already decoded RGB), in input order."""
        for i, a in enumerate(arrays):
            if not (isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3):
                raise ImageReadError(f"array {i}: {describe(a)}; score_arrays takes HxWx3 uint8 arrays")
            check_size(self.spec, a, f"array {i} {describe(a)}")
        return self._score([np.ascontiguousarray(a) for a in arrays])

    def _chunks(self, rgbs: Sequence[np.ndarray]) -> list[list[int]]:
        """Index lists to score together: same-size groups cut to batch_size, or singles."""
        if not self.batchable or self.batch_size == 1:
            return [[i] for i in range(len(rgbs))]
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, a in enumerate(rgbs):
            groups[a.shape[:2]].append(i)
        bs = self.batch_size
        return [idx[k : k + bs] for idx in groups.values() for k in range(0, len(idx), bs)]

    def _forward(self, x: torch.Tensor) -> list[float]:
        with torch.no_grad(), torch.autocast(self.device.type, dtype=torch.float16, enabled=self.half):
            out = self.model(x.to(self.device))
        if isinstance(out, (tuple, list)):
            out = out[0]
        if out.dtype in (torch.float16, torch.bfloat16):  # under autocast; native scores stay float64
            out = out.float()
        out = out.detach().reshape(-1)
        if out.numel() != x.shape[0]:
            raise RuntimeError(f"{self.spec.name}: expected {x.shape[0]} scores, got shape {tuple(out.shape)}")
        return [float(v) for v in out.cpu().tolist()]

    def _score(self, rgbs: Sequence[np.ndarray]) -> list[float]:
        scores: list[float | None] = [None] * len(rgbs)
        for idx in self._chunks(rgbs):
            for i, s in zip(idx, self._forward_backing_off(rgbs, idx)):
                scores[i] = s
        return scores  # type: ignore[return-value]

    def _forward_backing_off(self, rgbs: Sequence[np.ndarray], idx: list[int]) -> list[float]:
        """Score one same-size group; on out-of-memory, halve the batch (and keep it halved).

        A single image that still does not fit raises the out-of-memory error.
        """
        x = None
        try:
            x = torch.stack([to_tensor(rgbs[i]) for i in idx])
            return self._forward(x)
        except Exception as e:  # noqa: BLE001 - only out-of-memory is handled here
            if not _is_oom(e) or len(idx) == 1:
                raise
        del x
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        half = max(1, len(idx) // 2)
        if half < self.batch_size:
            warnings.warn(f"{self.spec.name}: out of memory with {len(idx)} images a batch; "
                          f"batch_size lowered to {half}", RuntimeWarning, stacklevel=3)
            self.batch_size = half
        return self._forward_backing_off(rgbs, idx[:half]) + self._forward_backing_off(rgbs, idx[half:])


def _is_oom(e: BaseException) -> bool:
    """True for CUDA (or other accelerator / host) out-of-memory errors."""
    if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()
