"""Metric names -> scorers: the one place that turns what a user writes into something that scores.

`banana100 score`, `demo`, `report` and the Space all call `resolve` / `parse_metrics` /
`make_scorer`. A name is one of:

- a metric of the table (`niqe`, `topiq_nr`, ... the 21 of the roster) or an evaluator beyond it
  (`visualquality_r1`; `rali` is listed but unavailable, and says why);
- `pyiqa:<id>`: any per-image no-reference metric of pyiqa (`pyiqa.list_models(metric_mode="NR")`),
  its direction from pyiqa's own table (`DEFAULT_CONFIGS[id]["lower_better"]`, False when unset);
  pyiqa fetches its weights itself. `pyiqa:<roster id>` is the table's metric with the pyiqa backend;
- a folder or Hub id of an evaluate module that follows the metric-module contract
  (`compute(images=[...])` -> `{"scores": [...], "lower_better": bool}`). It is loaded and run on
  one 256x256 probe image when first resolved: that checks the contract and gives the direction.

Anything else, or a module that breaks the contract, is an UnknownMetricError of one line saying why.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from banana100.errors import Banana100Error, UnknownMetricError, UsageError, WeightsNotFoundError
from banana100.metrics.engine.contract import Scorer, Scores
from banana100.metrics.table import (DEFAULT_BATCH_SIZE, EVALUATORS, METRICS, ROSTER, MetricSpec, did_you_mean,
                                     get_metric, known_names)

PYIQA_PREFIX = "pyiqa:"
from banana100.metrics.detector.model import REL_NAME as RELATIVE  # noqa: E402
# pyiqa lists these as NR but they score a set of images (FID, IS) or need a caption (CLIPScore)
NOT_PER_IMAGE = {"fid": "compares two sets of images", "fid_dinov2": "compares two sets of images",
                  "sfid": "compares two sets of images", "inception_score": "scores a set of images",
                  "clipscore": "needs a caption per image"}
PROBE_SIDE = 256


@dataclass
class ResolvedMetric:
    """A metric name resolved: what it is, its direction, and how to build its scorer."""

    name: str  # as written in the scores file's `metric` column
    kind: str  # table | evaluator | pyiqa | module | relative
    spec: MetricSpec  # the table's entry, or one made for a user's metric
    module: Any = field(default=None, repr=False)  # the loaded evaluate module (kind "module")

    @property
    def display_name(self) -> str:
        return self.spec.display_name

    @property
    def lower_better(self) -> bool:
        return self.spec.lower_better


_CACHE: dict[str, ResolvedMetric] = {}
_LOCK = threading.Lock()


def resolve(name: str) -> ResolvedMetric:
    """The metric `name` refers to (cached per process); UnknownMetricError saying why if none."""
    name = name.strip()
    if not name:
        raise UnknownMetricError("empty metric name")
    with _LOCK:
        if name not in _CACHE:
            _CACHE[name] = _resolve(name)
        return _CACHE[name]


def _resolve(name: str) -> ResolvedMetric:
    key = name.lower()  # the table's ids and pyiqa's are lower case: NIQE is niqe
    if key in METRICS:
        return ResolvedMetric(key, "table", METRICS[key])
    if key == RELATIVE:  # edit_damage against each image's reference (metrics/detector/relative.py)
        from banana100.metrics.detector import relative as edit_damage_rel

        return ResolvedMetric(key, "relative", edit_damage_rel.spec())
    if key in EVALUATORS:
        spec = EVALUATORS[key]
        if spec.status != "available":
            raise UnknownMetricError(f"{key}: {spec.status}: {spec.status_note}")
        return ResolvedMetric(key, "evaluator", spec)
    if key.startswith(PYIQA_PREFIX):
        return _resolve_pyiqa(PYIQA_PREFIX + name[len(PYIQA_PREFIX):])
    if Path(name).is_dir() or _looks_like_hub_id(name):
        return _resolve_module(name)
    raise UnknownMetricError(
        f"unknown metric {name!r}{did_you_mean(key)}: not in the metric table ({', '.join(known_names())}), "
        "not pyiqa:<id>, not an existing folder, not a Hub id (owner/name)")


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/")) and not Path(name).exists()


def _resolve_pyiqa(name: str) -> ResolvedMetric:
    pid = name[len(PYIQA_PREFIX):]
    if pid.lower() in METRICS:
        pid = pid.lower()
    if pid in METRICS:  # the table knows it better (weights store, sizes): its pyiqa backend
        return ResolvedMetric(pid, "table", METRICS[pid])
    from banana100.extras import require_extra

    require_extra("deep", f"the metric {name}")
    import pyiqa
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    pid = {k.lower(): k for k in DEFAULT_CONFIGS}.get(pid.lower(), pid)  # any case (pyiqa's own ids mix some)
    name = PYIQA_PREFIX + pid
    if pid not in DEFAULT_CONFIGS:
        raise UnknownMetricError(f"{name}: pyiqa {pyiqa.__version__} has no metric {pid!r}{did_you_mean(pid, DEFAULT_CONFIGS)} "
                                 "(its no-reference ids: pyiqa.list_models(metric_mode='NR'))")
    cfg = DEFAULT_CONFIGS[pid]
    if cfg.get("metric_mode") != "NR":
        raise UnknownMetricError(f"{name}: a full-reference metric (it compares with a reference image); "
                                 "Banana100 needs no-reference metrics")
    if pid in NOT_PER_IMAGE:
        raise UnknownMetricError(f"{name}: not a per-image quality score (it {NOT_PER_IMAGE[pid]})")
    low, high = _range(cfg.get("score_range"))
    spec = MetricSpec(pid, f"{pid} (pyiqa)", "user", bool(cfg.get("lower_better", False)), (low, high),
                      batchable=False, paper="see pyiqa's model card", original_code="https://github.com/chaofengc/IQA-PyTorch")
    return ResolvedMetric(name, "pyiqa", replace(spec, name=name))


def _range(text) -> tuple[float | None, float | None]:
    """pyiqa's "low, high" score range ("~" marks an approximate or open end) as numbers or None."""
    parts = [p.strip().lstrip("~").strip() for p in str(text).split(",")]
    if len(parts) != 2:
        return None, None
    try:
        return tuple(float(p) if p else None for p in parts)  # type: ignore[return-value]
    except ValueError:
        return None, None


def probe_image() -> np.ndarray:
    """A 256x256 RGB test image (a gradient with fixed noise): textured, not uniform."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(40, 210, PROBE_SIDE)
    base = (ramp[None, :, None] + ramp[:, None, None] * np.array([0.2, 0.5, 0.8])) / 1.5
    return np.clip(base + rng.normal(0, 12, (PROBE_SIDE, PROBE_SIDE, 3)), 0, 255).astype(np.uint8)


def _resolve_module(name: str) -> ResolvedMetric:
    """A user's evaluate module, loaded in a process of its own (`usermodule.ModuleWorker`: its exit, hang or
    current folder cannot touch the command) and run there on the probe image."""
    from banana100.errors import ScoringStopped
    from banana100.metrics.usermodule import ModuleWorker, LoadFailed

    try:
        module = ModuleWorker(name)
    except LoadFailed as e:
        if e.kind == "exit":  # the module's own code ran sys.exit() (or exit()) while being imported
            raise UnknownMetricError(_exited(name, SystemExit(e.payload), "loading it")) from None
        unreachable = "" if Path(name).is_dir() else _hub_unreachable_now()
        if unreachable:  # evaluate says the module "doesn't exist" when it could not ask the Hub
            raise UnknownMetricError(f"{name}: the Hub could not be reached ({unreachable}) and the module is not in "
                                     "the local cache; load it once with a network, or give its folder") from None
        raise UnknownMetricError(f"{name}: could not load it as an evaluate module ({e.payload[0]}: "
                                 f"{e.payload[1]})") from None
    except ScoringStopped as e:  # its process ended, or it hung, while loading
        raise UnknownMetricError(str(e).replace("; the images scored before are kept", "")) from None
    probe = "compute(images=[a 256x256 RGB image])"
    try:
        out = module.compute(images=[probe_image()])
    except SystemExit as e:
        module.close()
        raise UnknownMetricError(_exited(name, e, probe)) from None
    except ScoringStopped as e:
        raise UnknownMetricError(str(e).replace("compute()", probe).replace(
            "; the images scored before are kept", "")) from None
    except Exception as e:  # noqa: BLE001 - any failure on the probe makes the module unusable
        module.close()
        if type(e).__name__ == "TypeError":
            raise UnknownMetricError(f"{name}: its compute() does not take images= (the metric-module contract: "
                                     f"compute(images=[...]) -> scores, lower_better): {_first_line(e)}") from None
        raise UnknownMetricError(f"{name}: {probe} failed ({type(e).__name__}: {_first_line(e)})") from None
    problem = _contract_problem(out, 1)
    if problem:
        module.close()
        raise UnknownMetricError(f"{name}: breaks the metric-module contract: {problem}")
    label = str(out.get("metric") or module.info["name"] or Path(name).name)
    spec = MetricSpec(name, label, "user", bool(out["lower_better"]), (None, None), batchable=True,
                      original_code=name, model_backend="evaluate")
    return ResolvedMetric(name, "module", spec, module)


def _exited(name: str, e: SystemExit, doing: str) -> str:
    """A user's module that called sys.exit(): never a silent exit of the whole command (with
    status 0 it looked like success), one error naming the module instead."""
    return (f"{name}: {doing} called sys.exit({e.code!r}); a metric module must return its scores "
            "(or raise an exception), never exit")


def _contract_problem(out, n: int) -> str:
    if not isinstance(out, dict):
        return f"compute() returned {type(out).__name__}, not a dict"
    if "scores" not in out or "lower_better" not in out:
        return f"compute() returned keys {sorted(out)}; it must return 'scores' and 'lower_better'"
    if not isinstance(out["lower_better"], (bool, np.bool_)):
        return f"'lower_better' is {out['lower_better']!r}, not True or False"
    scores = out["scores"]
    if not hasattr(scores, "__len__") or len(scores) != n:
        return f"'scores' must hold one number per image ({n}), got {scores!r:.80}"
    for i, s in enumerate(scores):  # a bool is an int to Python: True would be read as a score of 1.0
        if s is not None and (isinstance(s, (bool, np.bool_, str, bytes)) or not hasattr(s, "__float__")
                              or "bool" in str(getattr(s, "dtype", ""))):
            return f"'scores'[{i}] is {s!r:.40} ({type(s).__name__}); each score must be a number (or None)"
    return ""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def parse_metrics(text: str) -> list[str]:
    """'piqe,pyiqa:musiq-ava,./my_metric' -> the names, each resolved (so a bad one fails now);
    'all' -> the 21 of the roster."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(ROSTER)
    if not names:
        raise UsageError("no metric given")
    return [resolve(n).name for n in names]


def label(name: str) -> str:
    """A metric's label for reports, plots and the Space: the table's display name; any other metric
    (pyiqa:<id>, a user's module) as written, the scores file's `metric` (`./my_metric`), one label
    wherever it shows, whether or not its module still loads (a module is never run again to name it)."""
    try:
        return get_metric(name).display_name
    except UnknownMetricError:
        pass
    if name == RELATIVE:
        return resolve(name).display_name
    return name


def make_scorer(name: str, device=None, batch_size: int | None = None, backend: str | None = None,
                mode: str = "pyiqa", precision: str = "exact", **options) -> Scorer:
    """The scorer of `name` (`banana100.metrics.engine.contract.Scorer`). `batch_size`: the most images per forward pass; None: the metric's own
    default (DEFAULT_BATCH_SIZE, 8, for all but VisualQuality-R1, which takes as many as the free
    memory holds). `options` go to the VisualQuality-R1 scorer (max_pixels, keep_text, ...);
    `precision` ("exact" or "fast") applies to the engine's scorers (the table's metrics and
    pyiqa:<id>); the others score as they always do."""
    r = resolve(name)
    if r.kind == "evaluator":
        from banana100.metrics.vlm.scorer import VLMScorer

        if backend not in (None, "transformers"):
            raise UsageError(f"{name}: its only backend is 'transformers', got {backend!r}")
        return VLMScorer(r.name, device=device, batch_size=batch_size, **options)  # None: memory-sized
    if batch_size is None:
        batch_size = DEFAULT_BATCH_SIZE
    if r.kind == "table":
        from banana100.metrics.engine.scorer import MetricScorer

        if name.startswith(PYIQA_PREFIX):
            backend = "pyiqa"
        return MetricScorer(r.name, device=device, batch_size=batch_size, backend=backend, mode=mode,
                            precision=precision)
    if r.kind == "relative":
        from banana100.metrics.detector.relative import RelativeScorer

        return RelativeScorer(device=device, batch_size=batch_size)
    if backend not in (None, "pyiqa" if r.kind == "pyiqa" else "evaluate"):
        raise UsageError(f"{name}: a metric of your own has no backend choice (got --backend {backend})")
    if r.kind == "pyiqa":
        return _pyiqa_scorer(r, device, batch_size, precision)
    return ModuleScorer(r, device=device, batch_size=batch_size)


def _pyiqa_scorer(r: ResolvedMetric, device, batch_size, precision: str = "exact"):
    from banana100.metrics.engine.scorer import MetricScorer, default_device

    device = device or default_device()
    held = _PREBUILT.pop(r.name, None)  # built on the CPU by the offline preflight (`check_pyiqa_buildable`)
    model = held if held is not None and str(device) == "cpu" else _build_pyiqa(r, device)
    return MetricScorer.from_model(r.spec, model, device=device, batch_size=batch_size, precision=precision)


_PREBUILT: dict[str, Any] = {}


def check_pyiqa_buildable(name: str) -> list[str]:
    """Offline: whether pyiqa can build `name` (a pyiqa:<id>) from the files at hand, built on the CPU (and
    kept for the run); the files it would have downloaded, else []. pyiqa fetches its weights itself, so
    only a build tells (the preflight said "ready" and the run then failed)."""
    r = resolve(name)
    try:
        _PREBUILT[r.name] = _build_pyiqa(r, "cpu")
    except WeightsNotFoundError as e:
        return list(e.missing_urls)
    return []


def _build_pyiqa(r: ResolvedMetric, device):
    """pyiqa.create_metric for a pyiqa:<id>; offline, every download refused at once (no "Downloading:" line)
    and a refused one is a WeightsNotFoundError naming the file (exit status 1, as for the table's metrics)."""
    import pyiqa

    pid = r.name[len(PYIQA_PREFIX):]
    unreachable = _hub_unreachable_now()
    refused: list[str] = []
    try:
        with _no_downloads(unreachable, refused):
            return pyiqa.create_metric(pid, device=device)
    except Exception as e:  # noqa: BLE001 - pyiqa raises many kinds (download, missing package)
        if refused:
            files = ", ".join(f"{u.rsplit('/', 1)[-1]} (from {u})" for u in refused)
            error = WeightsNotFoundError(
                f"missing files: {r.name}: {files}; pyiqa reads them from $TORCH_HOME/hub/pyiqa and downloads them "
                f"itself, which cannot happen now ({unreachable}): run it once with a network")
            error.missing_urls = refused
            raise error from None
        if unreachable:
            raise UnknownMetricError(f"{r.name}: pyiqa could not build it and the Hub could not be reached "
                                     f"({unreachable}); it downloads its weights itself into $TORCH_HOME/hub/pyiqa: "
                                     f"run once with a network ({type(e).__name__}: {_first_line(e)})") from None
        raise UnknownMetricError(f"{r.name}: pyiqa could not build it ({type(e).__name__}: {_first_line(e)}); "
                                 "pyiqa downloads its weights itself into $TORCH_HOME/hub/pyiqa") from None


def _hub_unreachable_now() -> str:
    """Why no download can happen now ("" when one can): HF_HUB_OFFLINE, or the quick probe of
    the weights store (an offline machine answered only after ~55 s of retries without it)."""
    from banana100.metrics import weights

    return "HF_HUB_OFFLINE=1" if weights.offline() else weights.hub_unreachable()


@contextlib.contextmanager
def _no_downloads(reason: str, refused: list | None = None):
    """While pyiqa builds a metric: when `reason` says the network is out, every download fails
    at once (torch.hub, pyiqa's own, the Hub's retries) instead of after its retries, its URL added
    to `refused`; cached files are read as usual. The "Downloading: ..." line pyiqa and torch.hub
    print before a download is dropped (nothing is downloaded); their other output goes through."""
    if not reason:
        yield
        return
    import io
    import sys

    import torch.hub
    from huggingface_hub import constants

    def refuse(url, *args, **kwargs):
        if refused is not None:
            refused.append(url)
        raise OSError(f"not downloaded: {url} ({reason})")

    try:  # pyiqa's own copy of torch.hub's function (pyiqa 0.1.x)
        import pyiqa.utils.download_util as pyiqa_download
    except ImportError:
        pyiqa_download = None
    patched = [(torch.hub, "download_url_to_file", refuse), (constants, "HF_HUB_OFFLINE", True)]
    if pyiqa_download is not None and hasattr(pyiqa_download, "download_url_to_file"):
        patched.append((pyiqa_download, "download_url_to_file", refuse))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, value in patched:
        setattr(owner, name, value)
    said = {sys.stdout: io.StringIO(), sys.stderr: io.StringIO()}
    try:
        with contextlib.redirect_stdout(said[sys.stdout]), contextlib.redirect_stderr(said[sys.stderr]):
            yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        for stream, text in said.items():
            stream.write("".join(line for line in text.getvalue().splitlines(keepends=True)
                                 if not line.startswith("Downloading: ") and line.strip()))


class ModuleScorer(Scorer):
    """A user's evaluate module behind the scorer contract: one compute() per batch of arrays."""

    mode = "module"
    backend = "evaluate"

    def __init__(self, resolved: ResolvedMetric, device=None, batch_size: int = DEFAULT_BATCH_SIZE):
        from banana100.metrics.engine.scorer import check_device

        self.resolved, self.spec, self.module = resolved, resolved.spec, resolved.module
        self.device, self.batch_size = check_device(device), int(batch_size)

    def measure(self, arrays, names, records=None) -> Scores:
        from banana100.errors import ScoreUndefinedError, ScoringStopped

        arrays, names = list(arrays), list(names)
        scores: list[float | None] = []
        for k in range(0, len(arrays), self.batch_size):
            part = arrays[k : k + self.batch_size]
            try:  # in the module's own process (usermodule.ModuleWorker); ScoringStopped stops the run
                out = self.module.compute(images=part)
            except SystemExit as e:
                raise ScoringStopped(_exited(self.name, e, "compute()")) from None
            problem = _contract_problem(out, len(part))
            if problem:
                raise Banana100Error(f"{self.name}: breaks the metric-module contract: {problem}")
            scores.extend(None if s is None else float(s) for s in out["scores"])
        failed = {i: ScoreUndefinedError(f"{names[i]}: {self.name} gave {s} for this image (no score)")
                  for i, s in enumerate(scores) if s is None or not math.isfinite(s)}
        return Scores(scores, failed)

    def __repr__(self) -> str:
        return f"ModuleScorer({self.name!r})"


def clear_cache() -> None:
    """Forget resolved metrics (tests; a module edited on disk), and stop their modules' processes."""
    with _LOCK:
        for r in _CACHE.values():
            if r.kind == "module":
                r.module.close()
        _CACHE.clear()
