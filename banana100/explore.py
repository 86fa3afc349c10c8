"""Exploring chains: one chain's images, its metric curves and verdicts, and live chains.

This is what the Gradio Space (`space/app.py`) shows, as library functions, so that the Space
stays a thin face and a notebook can do the same:

    ex = Explorer.open("banana100-dataset", "scores.parquet")   # folder, run folder or Hub id
    ex.chain_ids()                       # every chain, sorted
    ex.image(chain_id, step)             # PIL image (display size)
    curves = ex.curves(chain_id)         # every metric's score vs step, oriented + normalised
    plot_curves(curves, step=10)         # matplotlib figure: down = worse, marker at step 10
    ex.verdicts(chain_id)                # the protocol's verdict per metric for that chain
    ex.summary()                         # failure rate per metric over all chains

and, for a chain made live from one image (the Space's "Try it" tab):

    for step, rgb, meta in stream_chain(make_editor("simulated"), rgb, steps=20): ...

The original release (`ORIGINAL_RELEASE`: the Hub dataset and the pattern its file paths follow,
in one place) is listed up front and fetched one chain at a time; its scores are computed on
demand and cached (`ChainScores`), unless the release publishes a scores file:

    ex = open_release(ORIGINAL_RELEASE, cache_dir, metrics=["piqe", "niqe", "brisque"])
    ex.score_chain(chain_id, progress=lambda fraction, text: ...)
    view = ex.why(chain_id, step)        # crop, residual since step 1, MSCN map, GGD shapes

Orientation and verdicts come from `banana100.metrics.protocol` (through `banana100.report.analyse`);
nothing here re-implements them; chain files are grouped by `importer.plan_chains` and imported
by `importer.import_chains`, scores come from `engine.MetricScorer`. `build_demo_set` makes a
small offline set (generated paper-like sources, simulated editor, fast metrics) with the same
functions `banana100 demo` uses.
"""

from __future__ import annotations

import io
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from banana100 import about
from banana100.errors import Banana100Error, DatasetError, ImageReadError, UploadError
from banana100.fileio import write_file_atomic
from banana100.metrics.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP
from banana100.metrics.table import METRICS
from banana100.schema import chain_id as make_chain_id

#: Environment variables the Space reads (see `SpaceConfig.from_env`).
DATASET_ENV = "BANANA100_SPACE_DATASET"  # a dataset folder, a run folder, or a Hub dataset id
SCORES_ENV = "BANANA100_SPACE_SCORES"  # a scores Parquet file (`banana100 score`), or hf://datasets/<id>/<file>
CACHE_ENV = "BANANA100_SPACE_CACHE"  # where the demo set (and Hub downloads) go
RELEASE_ENV = "BANANA100_SPACE_RELEASE"  # the original release: Hub id, hf:// URL or a local copy laid out the same
RELEASE_PATTERN_ENV = "BANANA100_SPACE_RELEASE_PATTERN"  # how its file paths name chain and step
DEFAULT_CACHE = Path.home() / ".cache" / "banana100-space"

DISPLAY_SIDE = 768  # longest side of the images shown
_THUMB_QUALITY = 95


#: This toolkit's own detector of recursive-edit damage: needs no files, so the demo set and the
#: release view score it beside the NR-IQA metrics (`metrics/edit_damage`).
DETECTOR = "edit_damage"


def with_detector(metrics: list[str]) -> list[str]:
    """`metrics` and the detector after them (once)."""
    return [*[m for m in metrics if m != DETECTOR], DETECTOR]


def metric_label(metric: str) -> str:
    from banana100.metrics.resolve import label

    return label(metric)  # the table's name, or a user's metric (pyiqa:<id>, a module) as resolved


def _thumbnail(img: Image.Image, max_side: int) -> Image.Image:
    img = img.convert("RGB")
    if max(img.size) > max_side:
        img = img.copy()
        img.thumbnail((max_side, max_side), Image.LANCZOS)
    return img


def _jpeg(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=_THUMB_QUALITY, subsampling=0)  # 4:4:4: keeps the colour grain
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Chains on disk or on the Hub


@dataclass(frozen=True)
class ChainInfo:
    chain_id: str
    source_id: str
    setting: str
    repeat: int
    steps: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{self.source_id} | {self.setting} | repeat {self.repeat} ({len(self.steps)} images)"

    @property
    def last_step(self) -> int:
        return max(self.steps)


class ChainImages:
    """The images of every chain of a run folder, a dataset folder or a Hub dataset.

    Only record columns are read up front; a chain's images are read when it is first shown
    (a dataset: only the row groups holding that chain) and kept, at display size, for the
    `keep` chains shown last.
    """

    def __init__(self, location: str, kind: str, chains: dict[str, ChainInfo], loader, keep: int = 4,
                 max_side: int = DISPLAY_SIDE):
        self.location = location
        self.kind = kind  # "run folder" | "dataset folder" | "Hub dataset"
        self.chains = chains
        self._loader = loader  # chain_id -> {step: encoded image bytes}
        self._cache: OrderedDict[str, dict[int, bytes]] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()
        self.max_side = max_side

    @classmethod
    def open(cls, location: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> ChainImages:
        """A local run folder (manifest.jsonl), a local dataset folder, or a Hub dataset id."""
        from banana100.dataset.reader import is_dataset_dir
        from banana100.chains.manifest import MANIFEST_NAME

        path = Path(location)
        if (path / MANIFEST_NAME).is_file():
            return _run_folder(path)
        if is_dataset_dir(path):
            from fsspec.implementations.local import LocalFileSystem

            from banana100.dataset.reader import dataset_files

            return _dataset(str(path), "dataset folder", LocalFileSystem(), [str(f) for f in dataset_files(path)])
        if path.exists():
            raise DatasetError(f"{path} is neither a run folder (no {MANIFEST_NAME}) nor a dataset folder "
                               "(no README.md with YAML configs)")
        text = str(location)
        if text.count("/") == 1 and not text.startswith((".", "/")):
            return _hub_dataset(text, cache_dir)
        raise DatasetError(f"{location}: no such folder, and not a Hub dataset id (owner/name)")

    def chain_ids(self) -> list[str]:
        return sorted(self.chains)

    def _chain(self, chain_id: str) -> dict[int, bytes]:
        with self._lock:
            if chain_id in self._cache:
                self._cache.move_to_end(chain_id)
                return self._cache[chain_id]
        raw = self._loader(chain_id)
        thumbs = {}
        for step, data in raw.items():
            try:
                with Image.open(io.BytesIO(data)) as img:
                    thumbs[step] = _jpeg(_thumbnail(img, self.max_side))
            except Exception as e:  # noqa: BLE001 - one unreadable image must not hide the chain
                raise ImageReadError(f"{self.location}: chain {chain_id} step {step}: cannot decode image ({e})") from None
        with self._lock:
            self._cache[chain_id] = thumbs
            while len(self._cache) > self._keep:
                self._cache.popitem(last=False)
        return thumbs

    def originals(self, chain_id: str) -> dict[int, bytes | Path]:
        """The chain's images at full size, {step: file path or encoded bytes} (not cached)."""
        if chain_id not in self.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        return self._loader(chain_id)

    def image(self, chain_id: str, step: int) -> Image.Image:
        """The image at `step` of a chain, at display size (longest side `max_side`)."""
        if chain_id not in self.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        thumbs = self._chain(chain_id)
        if step not in thumbs:
            raise Banana100Error(f"chain {chain_id} has no step {step} (it has {min(thumbs)}-{max(thumbs)})")
        return Image.open(io.BytesIO(thumbs[step])).convert("RGB")


def _infos(records: list[dict]) -> dict[str, ChainInfo]:
    by_chain: dict[str, list[dict]] = {}
    for r in records:
        by_chain.setdefault(r["chain_id"], []).append(r)
    out = {}
    for cid, rs in by_chain.items():
        first = rs[0]
        out[cid] = ChainInfo(cid, str(first["source_id"]), str(first["setting"]), int(first["repeat"]),
                             tuple(sorted(int(r["step"]) for r in rs)))
    return out


def _run_folder(run_dir: Path) -> ChainImages:
    from banana100.chains.manifest import image_path, read_manifest

    records = read_manifest(run_dir)
    paths = {(r["chain_id"], int(r["step"])): image_path(run_dir, r) for r in records}

    def load(chain_id):
        return {s: p.read_bytes() for (c, s), p in paths.items() if c == chain_id}

    return ChainImages(str(run_dir), "run folder", _infos(records), load)


_INDEX_COLUMNS = ["chain_id", "source_id", "setting", "repeat", "step"]


def _dataset(location: str, kind: str, fs, files: list[str]) -> ChainImages:
    """Index the record columns of Parquet `files` on filesystem `fs`; read images per chain."""
    from banana100.dataset.reader import index_rows, row_group_images

    records = []
    where: dict[str, list[tuple[int, int, int, int]]] = {}  # chain -> [(file, row group, row in group, step)]
    for fi, g, j, rec in index_rows(files, _INDEX_COLUMNS, fs):
        records.append(rec)
        where.setdefault(rec["chain_id"], []).append((fi, g, j, int(rec["step"])))
    if not records:
        raise DatasetError(f"{location}: the dataset has no rows")

    def load(chain_id):
        out: dict[int, bytes] = {}
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for fi, g, j, step in where.get(chain_id, []):
            groups.setdefault((fi, g), []).append((j, step))
        for (fi, g), rows in sorted(groups.items()):
            images = row_group_images(files[fi], g, fs)
            for j, step in rows:
                data = images[j].as_py()
                if data is None:
                    raise DatasetError(f"{files[fi]}: chain {chain_id} step {step} has no image bytes")
                out[step] = data
        return out

    return ChainImages(location, kind, _infos(records), load)


def _hub_dataset(repo_id: str, cache_dir) -> ChainImages:
    """A Hub dataset in the layout `dataset_script/` writes: its card's `default` config, read remotely."""
    from huggingface_hub import HfFileSystem, hf_hub_download

    from banana100.dataset.layout import CARD_NAME, DEFAULT_CONFIG
    from banana100.dataset.reader import card_configs, config_patterns

    try:
        card = hf_hub_download(repo_id, CARD_NAME, repo_type="dataset",
                               cache_dir=None if cache_dir is None else str(Path(cache_dir) / "hub"))
    except Exception as e:  # noqa: BLE001 - offline, not found, gated: say which
        raise DatasetError(f"cannot read the card of the Hub dataset {repo_id!r} ({type(e).__name__}: {e})") from None
    configs = card_configs(Path(card).parent)
    if not configs:
        raise DatasetError(f"Hub dataset {repo_id!r}: its card has no YAML `configs` (not a Banana100 dataset layout)")
    names = [c["config_name"] for c in configs]
    config = DEFAULT_CONFIG if DEFAULT_CONFIG in names else names[0]
    fs = HfFileSystem()
    root = f"datasets/{repo_id}"
    files: set[str] = set()
    for pattern in config_patterns(configs, config, f"Hub dataset {repo_id!r}"):
        files.update(p for p in fs.glob(f"{root}/{pattern}") if p.endswith(".parquet"))
    if not files:
        raise DatasetError(f"Hub dataset {repo_id!r}: config {config!r} has no Parquet files")
    return _dataset(f"hf://{root}", "Hub dataset", fs, sorted(files))


# ---------------------------------------------------------------------------------------------
# The original release (kenantang/Banana100), read one chain at a time


@dataclass(frozen=True)
class ReleaseSpec:
    """Where the original Banana100 release is and how its file paths name chains and steps.

    `location`: a Hub dataset id (`owner/name`), an `hf://datasets/owner/name` URL, or a local
    folder laid out like the Hub repository (a stand-in for tests, or a downloaded copy).
    `pattern`: a `banana100 import-chains` pattern (`banana100.chains.importer`), relative to the
    repository root. `scores`: paths in the repository of a published scores table in the
    `banana100 score` format (first one found is used; none: scores are computed on demand).
    """

    location: str
    pattern: str
    model: str = "gemini-3-pro-image-preview"
    scores: tuple[str, ...] = ("scores.parquet", "scores/scores.parquet")

    @property
    def url(self) -> str:
        text = self.location.strip()
        if "://" in text or text.startswith((".", "/")) or Path(text).exists():
            return text
        if text.count("/") == 1:
            return f"hf://datasets/{text}"
        raise DatasetError(f"{text!r}: not a Hub dataset id (owner/name), an hf:// URL or a folder")

    @classmethod
    def from_env(cls, env=None) -> ReleaseSpec:
        env = os.environ if env is None else env
        return cls(location=(env.get(RELEASE_ENV) or "").strip() or ORIGINAL_RELEASE.location,
                   pattern=(env.get(RELEASE_PATTERN_ENV) or "").strip() or ORIGINAL_RELEASE.pattern,
                   model=ORIGINAL_RELEASE.model, scores=ORIGINAL_RELEASE.scores)


#: The original release, in this ONE place (override with BANANA100_SPACE_RELEASE and
#: BANANA100_SPACE_RELEASE_PATTERN). ASSUMPTION: the Hub could not be reached when this was
#: written and no public listing of the repository's files was found, so the layout below (one
#: image file per step, `{setting}/{source}/rep{repeat}/img_{step:03d}.png`, step 0 = the
#: source) is our guess; change the pattern here when the real layout is known. A release in
#: the Parquet layout `dataset_script/` writes is read by `ChainImages.open("owner/name")` instead.
ORIGINAL_RELEASE = ReleaseSpec(
    location=about.ORIGINAL_DATASET,
    pattern="{setting}/{source}/rep{repeat}/img_{step:03d}.png",
)


class ReleaseChains(ChainImages):
    """Chains of a release folder (on the Hub or local): listed up front, fetched per chain.

    The file listing is grouped into chains by `importer.plan_chains` (the same rules as
    `banana100 import-chains`); nothing is downloaded until a chain is shown. Then that chain's
    files are copied into `<cache>/files/` (the repository's own paths) and imported with
    `importer.import_chains` into the run folder `<cache>/run/` (checked images, SHA-256, parent
    links), from which they are shown and scored.
    """

    def __init__(self, spec: ReleaseSpec, cache_dir: str | os.PathLike, keep: int = 4, max_side: int = DISPLAY_SIDE):
        import fsspec

        from banana100.chains.importer import plan_chains

        from banana100.errors import ImportChainsError

        self.spec = spec
        url = spec.url
        try:
            if url.startswith("hf://"):  # the Hub, through huggingface_hub's own filesystem
                import huggingface_hub

                self.fs, self.root = huggingface_hub.HfFileSystem(), url[len("hf://"):]
            else:
                self.fs, self.root = fsspec.core.url_to_fs(url)
            if not self.fs.exists(self.root):
                raise FileNotFoundError("no such repository or folder")
            listing = self.fs.find(self.root)
        except Exception as e:  # noqa: BLE001 - offline, not found, gated: say which
            raise DatasetError(f"cannot list the release {url} ({type(e).__name__}: {e})") from None
        root = self.root.rstrip("/") + "/"
        self.rel_paths = sorted(p[len(root):] for p in listing if p.startswith(root))
        try:
            plan = plan_chains(self.rel_paths, spec.pattern, model=spec.model)
        except ImportChainsError as e:
            raise DatasetError(f"release {url}: {e}") from None
        if not plan.chains:
            raise DatasetError(f"release {url}: none of its {len(self.rel_paths)} files matches the pattern "
                               f"{spec.pattern!r}; set {RELEASE_PATTERN_ENV} to the layout of its files")
        self.plan = plan
        key = "".join(c if c.isalnum() or c in "._-" else "_" for c in url)
        self.cache = Path(cache_dir) / "release" / key
        self.files_dir, self.run_dir = self.cache / "files", self.cache / "run"
        self._fetch_lock = threading.Lock()
        infos = {cid: ChainInfo(cid, c.source_id, c.setting, c.repeat, tuple(sorted(c.files)))
                 for cid, c in plan.chains.items()}
        super().__init__(url, "original release", infos, self._load, keep=keep, max_side=max_side)

    def published_scores(self) -> Path | None:
        """The release's own scores file (`spec.scores`), downloaded into the cache; None when absent."""
        for rel in self.spec.scores:
            if rel in self.rel_paths:
                target = self.cache / "published" / rel
                if not target.is_file():
                    self._get(rel, target)
                return target
        return None

    def _get(self, rel: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        try:
            self.fs.get_file(f"{self.root.rstrip('/')}/{rel}", str(tmp))
        except Exception as e:  # noqa: BLE001
            tmp.unlink(missing_ok=True)
            raise DatasetError(f"cannot download {rel} from {self.location} ({type(e).__name__}: {e})") from None
        tmp.replace(target)

    def fetch(self, chain_id: str, progress=None) -> dict[int, Path]:
        """Download and import one chain (once); {step: image file in the run folder}."""
        from banana100.chains.importer import import_chains
        from banana100.chains.manifest import MANIFEST_NAME, image_path, read_manifest

        if chain_id not in self.plan.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        files = self.plan.chains[chain_id].files
        with self._fetch_lock:  # one import at a time: they share the run folder's manifest
            todo = [rel for rel in files.values() if not (self.files_dir / rel).is_file()]
            for i, rel in enumerate(todo):
                if progress is not None:
                    progress(i / len(todo), f"downloading {chain_id}: {i} of {len(todo)} images")
                self._get(rel, self.files_dir / rel)
            records = read_manifest(self.run_dir) if (self.run_dir / MANIFEST_NAME).is_file() else []
            have = {int(r["step"]) for r in records if r["chain_id"] == chain_id}
            if not set(files) <= have:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # gaps are shown as they are
                    import_chains(self.files_dir, self.spec.pattern, self.run_dir, model=self.spec.model, link=True)
                records = read_manifest(self.run_dir)
        return {int(r["step"]): image_path(self.run_dir, r) for r in records if r["chain_id"] == chain_id}

    def _load(self, chain_id: str) -> dict[int, bytes]:
        return {step: p.read_bytes() for step, p in self.fetch(chain_id).items()}

    def originals(self, chain_id: str) -> dict[int, bytes | Path]:
        return dict(self.fetch(chain_id))


# ---------------------------------------------------------------------------------------------
# Scores computed on demand, one chain at a time, cached on disk

#: Steps scored on demand: every step to 10 (the protocol's 1, 5, 10 and the early curve), then
#: sparser (20 is the protocol's last check). About 22 images for a 100-step chain.
ON_DEMAND_STEPS = (*range(11), 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)

_SCORERS: dict[tuple, object] = {}
_SCORERS_LOCK = threading.Lock()


def _scorer(metric: str, device: str, backend: str):
    from banana100.metrics.resolve import make_scorer, resolve

    key = (metric, device, backend)
    with _SCORERS_LOCK:
        if key not in _SCORERS:  # any metric the resolver knows: the table, pyiqa:<id>, a user's module
            table = resolve(metric).kind == "table"
            _SCORERS[key] = make_scorer(metric, device=device, backend=backend if table else None, batch_size=4)
        return _SCORERS[key]


class ChainScores:
    """Scores of one chain and metric, computed when first asked for and cached on disk.

    The cache key is (chain, metric, backend): `<root>/<chain_id>/<metric>__<backend>.parquet`,
    one row per scored step in the columns of a `banana100 score` table. Scoring goes through
    the library's engine (`engine.MetricScorer`, each metric's default backend unless told),
    a few images at a time so that `progress(fraction, text)` can follow it; a later call for
    more steps scores only the missing ones.
    """

    def __init__(self, root: str | os.PathLike, device: str = "cpu", backend: str | None = None,
                 steps=ON_DEMAND_STEPS):
        self.root = Path(root)
        self.device = device
        self.backend = backend
        self.steps = tuple(int(s) for s in steps)

    def backend_of(self, metric: str) -> str:
        from banana100.metrics.resolve import resolve

        if metric in METRICS:
            return METRICS[metric].check_backend(self.backend)
        return resolve(metric).spec.default_backend  # pyiqa:<id>: pyiqa; a user's module: evaluate

    def path(self, chain_id: str, metric: str) -> Path:
        if not chain_id or "/" in chain_id or chain_id.startswith("."):
            raise Banana100Error(f"unusable chain id {chain_id!r}")
        safe = re.sub(r"[^\w.+-]", "_", metric)  # a user's metric may be a path or a Hub id
        return self.root / chain_id / f"{safe}__{self.backend_of(metric)}.parquet"

    def cached(self, chain_id: str, metric: str) -> pd.DataFrame | None:
        path = self.path(chain_id, metric)
        return pd.read_parquet(path) if path.is_file() else None

    def wanted(self, info: ChainInfo) -> list[int]:
        return [s for s in info.steps if s in set(self.steps)] or list(info.steps)

    def missing(self, info: ChainInfo, metric: str) -> list[int]:
        have = self.cached(info.chain_id, metric)
        done = set() if have is None else {int(s) for s in have["step"]}
        return [s for s in self.wanted(info) if s not in done]

    def compute(self, info: ChainInfo, metric: str, images: dict, progress=None, device: str | None = None,
                chunk: int = 4) -> pd.DataFrame:
        """Score the chain's missing steps (`images`: {step: path or bytes}); the whole cached table."""
        from banana100.metrics.resolve import resolve

        spec = resolve(metric).spec
        before = self.cached(info.chain_id, metric)
        todo = [s for s in self.missing(info, metric) if s in images]
        scorer = _scorer(metric, device or self.device, self.backend_of(metric))
        rows = []
        for i in range(0, len(todo), chunk):
            if progress is not None:
                progress(i / max(1, len(todo)), f"{spec.display_name}: scoring {info.chain_id}, "
                                                f"{i} of {len(todo)} images")
            part = todo[i:i + chunk]
            scores, errors = _score_part(scorer, [images[s] for s in part])
            for j, (step, score) in enumerate(zip(part, scores)):
                # an image with no score (uniform, unreadable, too small) is a row with its error,
                # as in `banana100 score`: the protocol then names that step as missing
                rows.append({"chain_id": info.chain_id, "source_id": info.source_id, "setting": info.setting,
                             "repeat": info.repeat, "step": step, "metric": metric,
                             "score": float("nan") if score is None else float(score),
                             "lower_better": spec.lower_better, "error": errors.get(j), "backend": scorer.backend,
                             "mode": scorer.mode})
        table = pd.DataFrame(rows)
        if before is not None:
            table = pd.concat([before, table], ignore_index=True) if len(table) else before
        table = table.sort_values("step", ignore_index=True)
        if rows:
            path = self.path(info.chain_id, metric)
            sink = io.BytesIO()
            table.to_parquet(sink, index=False)
            write_file_atomic(path, sink.getvalue())  # banana100.fileio: one way to write a file whole
        return table


def _score_part(scorer, images: list) -> tuple[list, dict[int, str]]:
    """Scores of `images` (None where an image has none) and {index: error text}.

    The engine scores the others and raises one ImageReadError / ScoreUndefinedError carrying
    `scores` and `errors`; an image below the metric's minimum size fails the whole call, so the
    images are then scored one by one.
    """
    from banana100.errors import ImageTooSmallError, ScoreUndefinedError

    try:
        return list(scorer.score(images)), {}
    except (ImageReadError, ScoreUndefinedError) as e:
        scores = getattr(e, "scores", None)
        if scores is None:
            raise
        return list(scores), {int(k): str(v) for k, v in (getattr(e, "errors", None) or {}).items()}
    except ImageTooSmallError:
        if len(images) == 1:
            raise
    scores, errors = [], {}
    for j, image in enumerate(images):
        try:
            one, one_errors = _score_part(scorer, [image])
        except Banana100Error as e:
            one, one_errors = [None], {0: str(e)}
        scores.append(one[0])
        if 0 in one_errors:
            errors[j] = one_errors[0]
    return scores, errors


# ---------------------------------------------------------------------------------------------
# Scores: curves, verdicts, summary


def load_scores_any(location: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """A scores table (`banana100 score`) from a local path or `hf://datasets/<owner>/<name>/<file>`."""
    from banana100.report import load_scores

    text = str(location)
    if text.startswith("hf://datasets/"):
        parts = text[len("hf://datasets/"):].split("/", 2)
        if len(parts) != 3:
            raise Banana100Error(f"{text}: expected hf://datasets/<owner>/<name>/<file.parquet>")
        from huggingface_hub import hf_hub_download

        try:
            text = hf_hub_download(f"{parts[0]}/{parts[1]}", parts[2], repo_type="dataset",
                                   cache_dir=None if cache_dir is None else str(Path(cache_dir) / "hub"))
        except Exception as e:  # noqa: BLE001
            raise Banana100Error(f"cannot download {location} ({type(e).__name__}: {e})") from None
    return load_scores(text)


def chain_curves(scores: pd.DataFrame, chain_id: str) -> pd.DataFrame:
    """Every metric's scores for one chain, oriented (down = worse) and normalised to [0, 1].

    Columns: metric, label, step, score, oriented (score, negated for lower-is-better
    metrics, as the protocol orients it), normalised (oriented min-max scaled over the chain:
    1 = the metric's best score on this chain, 0 = its worst; 0.5 when the metric is flat).
    """
    rows = scores[(scores["chain_id"] == chain_id) & scores["score"].notna()]
    parts = []
    for metric, g in rows.groupby("metric", sort=False):
        g = g.sort_values("step")
        sign = -1.0 if bool(g["lower_better"].iloc[0]) else 1.0
        oriented = sign * g["score"].astype(float)
        lo, hi = oriented.min(), oriented.max()
        norm = (oriented - lo) / (hi - lo) if hi > lo else oriented * 0 + 0.5
        parts.append(pd.DataFrame({"metric": metric, "label": metric_label(metric), "step": g["step"].astype(int),
                                   "score": g["score"].astype(float), "oriented": oriented, "normalised": norm}))
    if not parts:
        return pd.DataFrame(columns=["metric", "label", "step", "score", "oriented", "normalised"])
    order = {m: i for i, m in enumerate(METRICS)}
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["metric", "step"], key=lambda s: s.map(order).fillna(len(order)) if s.name == "metric" else s,
                           kind="stable", ignore_index=True)


def plot_curves(curves: pd.DataFrame, step: int | None = None, title: str | None = None,
                check_steps=DEFAULT_CHECK_STEPS, reference_step: int = DEFAULT_REFERENCE_STEP,
                last_step: int | None = None):
    """A matplotlib figure of `chain_curves` output: normalised oriented score vs step, down = worse."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.8), dpi=100)
    metrics = list(dict.fromkeys(curves["metric"])) if len(curves) else []
    for metric in metrics:
        g = curves[curves["metric"] == metric]
        spec = METRICS.get(metric)
        direction = f" ({'lower' if spec.lower_better else 'higher'} is better)" if spec else ""
        if metric == DETECTOR:  # ours, not one of the paper's metrics: drawn apart
            ax.plot(g["step"], g["normalised"], lw=2.6, ls="--", color="black", marker="s", ms=3,
                    label=f"{metric_label(metric)} (this toolkit's detector; lower is better)")
            continue
        ax.plot(g["step"], g["normalised"], lw=1.8, marker="o", ms=2.5, label=f"{metric_label(metric)}{direction}")
    xmax = last_step if last_step is not None else (int(curves["step"].max()) if len(curves) else 20)
    for k in check_steps:
        if k <= xmax:
            ax.axvline(k, color="0.7", ls=":", lw=1)
    if reference_step <= xmax:
        ax.axvline(reference_step, color="0.7", ls="--", lw=1)
    if step is not None:
        ax.axvline(step, color="crimson", lw=2.2, alpha=0.85)
        ax.text(step, 1.06, f" step {step}", color="crimson", fontsize=9, va="bottom", ha="left" if step < 0.8 * xmax else "right")
    ax.set_xlim(-0.5, max(xmax, 1) + 0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(-0.08, 1.13)
    ax.set_yticks([0, 0.5, 1])
    ax.set_yticklabels(["worst", "", "best"])
    ax.set_xlabel("step (copies of a copy)")
    ax.set_ylabel("metric's verdict on the image\n(normalised; down = worse)", fontsize=9)
    if not metrics:
        ax.text(0.5, 0.5, "no scores for this chain", ha="center", va="center", transform=ax.transAxes, color="0.4")
    else:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(title or "A metric that sees the damage goes down as the steps go up", fontsize=10)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.3g}"


VERDICT_TEXT = {True: "pass (saw it)", False: "FAIL (missed it)", None: "incomplete"}


def verdict_table(results: dict, chain_id: str) -> pd.DataFrame:
    """The protocol's verdict per metric for one chain, from `report.analyse` output."""
    rows = []
    for metric, r in results.items():
        chain = next((c for c in r["per_chain"] if c["chain_id"] == chain_id), None)
        if chain is None:
            continue
        row = {"metric": metric_label(metric), "direction": "lower better" if r["lower_better"] else "higher better",
               "verdict": VERDICT_TEXT[chain["passed"]]}
        row.update({f"d{k}": _fmt(chain.get(f"d_{k}")) for k in r["check_steps"]})
        row["rho"] = _fmt(chain["rho"])
        rows.append(row)
    if rows:
        return pd.DataFrame(rows)
    return pd.DataFrame(columns=["metric", "direction", "verdict", *(f"d{k}" for k in DEFAULT_CHECK_STEPS), "rho"])


def summary_table(results: dict) -> pd.DataFrame:
    """Failure rate per metric over all chains, from `report.analyse` output."""
    rows = []
    for metric, r in results.items():
        fr = r["failure_rate"]
        rows.append({"metric": metric_label(metric), "chains": r["n_chains"], "passed": r["n_passed"],
                     "failed": r["n_failed"], "incomplete": r["n_incomplete"],
                     "failure rate": "n/a" if fr is None else f"{100 * fr:.0f} %",
                     "mean rho": _fmt(r["mean_rho"])})
    return pd.DataFrame(rows, columns=["metric", "chains", "passed", "failed", "incomplete", "failure rate", "mean rho"])


class Explorer:
    """A set of chains (images) and their scores, ready to show.

    Scores come from a table given up front (a `banana100 score` file), from `on_demand`
    (a `ChainScores` cache: `score_chain` fills it for the chain being looked at), or both.
    `summary()` then covers the chains scored so far (`scored_chains()`).
    """

    def __init__(self, images: ChainImages, scores: pd.DataFrame | None, note: str = "",
                 on_demand: ChainScores | None = None, metrics=()):
        self.images = images
        self.note = note
        self.on_demand = on_demand
        self.on_demand_metrics = list(metrics)
        self._lock = threading.Lock()
        self._originals: dict = {}
        self.scores = None
        self.results: dict = {}
        tables = [scores] if scores is not None and len(scores) else []
        if on_demand is not None:  # what earlier visits already scored
            for cid in images.chains:
                for m in self.on_demand_metrics:
                    t = on_demand.cached(cid, m)
                    if t is not None and len(t):
                        tables.append(t)
        if tables:
            self.add_scores(pd.concat(tables, ignore_index=True))

    @classmethod
    def open(cls, data: str | os.PathLike, scores: str | os.PathLike | None = None,
             cache_dir: str | os.PathLike | None = None, note: str = "") -> Explorer:
        images = ChainImages.open(data, cache_dir=cache_dir)
        table = load_scores_any(scores, cache_dir) if scores else None
        return cls(images, table, note)

    def add_scores(self, table: pd.DataFrame) -> None:
        """Merge more scores (a later row for the same chain, step and metric wins) and re-judge."""
        from banana100.report import analyse

        with self._lock:
            merged = table if self.scores is None else pd.concat([self.scores, table], ignore_index=True)
            merged = merged.drop_duplicates(["chain_id", "step", "metric"], keep="last", ignore_index=True)
            self.scores = merged
            self.results = analyse(merged) if len(merged) else {}

    def missing_metrics(self, chain_id: str) -> list[str]:
        """On-demand metrics with steps of this chain not yet scored."""
        if self.on_demand is None:
            return []
        info = self.info(chain_id)
        return [m for m in self.on_demand_metrics if self.on_demand.missing(info, m)]

    def load_cached(self, chain_id: str) -> None:
        """Take in what the on-demand cache holds for this chain (scored in another process, say)."""
        if self.on_demand is None:
            return
        tables = [t for m in self.on_demand_metrics if (t := self.on_demand.cached(chain_id, m)) is not None and len(t)]
        if tables:
            self.add_scores(pd.concat(tables, ignore_index=True))

    def score_chain(self, chain_id: str, metrics=None, progress=None, device: str | None = None) -> None:
        """Score this chain's missing steps with the on-demand metrics (or `metrics`), cached."""
        if self.on_demand is None:
            return
        todo = list(metrics) if metrics is not None else self.missing_metrics(chain_id)
        if not todo:
            return
        info = self.info(chain_id)
        if progress is not None:
            progress(0.0, f"fetching {chain_id}")
        images = self.images.originals(chain_id)
        for i, metric in enumerate(todo):
            sub = None
            if progress is not None:
                def sub(frac, text, i=i):
                    progress((i + frac) / len(todo), text)
            self.add_scores(self.on_demand.compute(info, metric, images, progress=sub, device=device))
        if progress is not None:
            progress(1.0, f"{chain_id}: scored")

    def scored_chains(self) -> int:
        return 0 if self.scores is None else int(self.scores["chain_id"].nunique())

    def chain_ids(self) -> list[str]:
        return self.images.chain_ids()

    def info(self, chain_id: str) -> ChainInfo:
        if chain_id not in self.images.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        return self.images.chains[chain_id]

    def find(self, source_id: str, setting: str, repeat: int) -> str | None:
        for cid, c in self.images.chains.items():
            if (c.source_id, c.setting, c.repeat) == (source_id, setting, int(repeat)):
                return cid
        return None

    def image(self, chain_id: str, step: int) -> Image.Image:
        return self.images.image(chain_id, int(step))

    def full_image(self, chain_id: str, step: int) -> np.ndarray:
        """One step at full size (HxWx3 uint8); the last chain's files (or bytes) are kept."""
        from banana100.imageio import load_rgb

        with self._lock:
            originals = self._originals.get(chain_id)
        if originals is None:
            originals = self.images.originals(chain_id)
            with self._lock:
                self._originals = {chain_id: originals}
        if int(step) not in originals:
            raise Banana100Error(f"chain {chain_id} has no step {step}")
        return load_rgb(originals[int(step)])

    def why(self, chain_id: str, step: int, reference_step: int = DEFAULT_REFERENCE_STEP) -> dict:
        """`why_view` of one step of a chain against its reference step (step 1)."""
        info = self.info(chain_id)
        ref = reference_step if reference_step in info.steps else min(info.steps)
        source = self.full_image(chain_id, 0) if 0 in info.steps else None
        return why_view(self.full_image(chain_id, ref), self.full_image(chain_id, step), source=source)

    def curves(self, chain_id: str) -> pd.DataFrame:
        if self.scores is None:
            return chain_curves(pd.DataFrame(columns=["chain_id", "metric", "step", "score", "lower_better"]), chain_id)
        return chain_curves(self.scores, chain_id)

    def metrics(self) -> list[str]:
        return list(dict.fromkeys([*self.results, *self.on_demand_metrics]))

    def verdicts(self, chain_id: str) -> pd.DataFrame:
        return verdict_table(self.results, chain_id)

    def summary(self) -> pd.DataFrame:
        return summary_table(self.results)

    def leaderboard_columns(self) -> list[str]:
        """What the leaderboard groups by: setting, and editor when the scores carry it."""
        if self.scores is None:
            return []
        return [c for c in ("setting", "editor") if c in self.scores and self.scores[c].notna().any()]

    def leaderboard(self) -> pd.DataFrame:
        """The leaderboard of the scores held (banana100.leaderboard), as the Space shows it."""
        from banana100.leaderboard import leaderboard

        by = self.leaderboard_columns()
        if self.scores is None or not len(self.scores):
            return pd.DataFrame(columns=["metric", *by, "chains", "failed", "failure rate", "mean rho"])
        with self._lock:
            board = leaderboard(self.scores, by)
        return pd.DataFrame({"metric": board["label"], **{c: board[c] for c in by}, "chains": board["chains"],
                             "failed": board["failed"],
                             "failure rate": [f"{100 * r:.0f} %" if r == r and r is not None else "n/a"
                                              for r in board["failure_rate"]],
                             "mean rho": [f"{r:+.2f}" if r == r and r is not None else "n/a" for r in board["mean_rho"]]})

    def leaderboard_png(self, path: str | os.PathLike) -> Path | None:
        """The leaderboard's heatmap (metrics x groups) written to `path`; None without scores."""
        from banana100.leaderboard import heatmap, leaderboard

        if self.scores is None or not len(self.scores):
            return None
        with self._lock:
            board = leaderboard(self.scores, self.leaderboard_columns())
        return heatmap(board, self.leaderboard_columns(), Path(path))

    def failure_sentence(self) -> str:
        """Which metrics failed on these chains, in words, from the protocol's results."""
        parts = []
        for metric, r in self.results.items():
            complete = r["n_chains"] - r["n_incomplete"]
            if complete:
                parts.append(f"{metric_label(metric)} missed the damage in {r['n_failed']} of {complete} chains")
        return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# The demo set


def build_demo_set(cache_dir: str | os.PathLike, chains: int = 4, steps: int = 20, metrics: str = "auto",
                   side: int = 768, progress: bool = False, log=None) -> tuple[Path, Path]:
    """Make (or reuse) a small offline set in `cache_dir`: (dataset folder, scores file).

    Generated sources like the paper's (`synth.GENERATED_SOURCES`: smooth, noise-free, flat and
    textured areas; `side` pixels wide) -> simulated-editor chains -> a dataset folder -> scores
    of `metrics` ("auto": PIQE plus NIQE and BRISQUE when their parameter files are at hand).
    The sources are shown at their own size: shrinking a grainy image averages its grain away,
    which is why the set is not made smaller than the effect needs. Each stage resumes; a
    finished set is reused as is. Its folder is named by this toolkit's version and the metrics
    this install can compute, so a cache shared by several clones or versions never shows
    scores this install could not make. `log` (e.g. print) hears whether the set is built or
    reused, and each stage of a build; `progress` shows the bars of generation and scoring.
    """
    from banana100 import __version__
    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains
    from banana100.dataset.build import build_dataset
    from banana100.demo import pick_metrics
    from banana100.scoring import score_to_parquet
    from banana100.synth import GENERATED_SOURCES_LICENCE, generated_sources

    say = log or (lambda text: None)
    chosen = pick_metrics(metrics)
    if metrics == "auto":  # the detector's curve beside the NR-IQA metrics'
        chosen = with_detector(chosen)
    if not chosen:
        raise Banana100Error("no metric available for the demo set")
    root = Path(cache_dir) / f"demo-v{__version__}-{chains}x{steps}-{side}-{'+'.join(chosen)}"
    dataset, scores = root / "dataset", root / "scores.parquet"
    done = root / "DONE"
    if done.is_file() and dataset.is_dir() and scores.is_file():
        say(f"reusing the demo set in {root} (built earlier by banana100 {__version__}; metrics {', '.join(chosen)})")
        return dataset, scores
    say(f"building a demo set in {root}: {chains} chains x {steps} steps, {side} px, metrics {', '.join(chosen)}")
    say(f"1/4 drawing {chains} sources")
    sources = generated_sources(root / "sources", chains, side)
    run_dir = root / "run"
    say(f"2/4 running {chains} simulated chains of {steps} steps")
    generate_chains(make_editor("simulated"), sources=sources, setting="replicate", steps=steps, repeats=1,
                    out_dir=run_dir, progress=progress)
    say("3/4 writing the dataset folder")
    if not dataset.is_dir():  # the card states the drawn sources' licence (the chains keep it)
        build_dataset([run_dir], dataset,
                      source_licences={p.stem: GENERATED_SOURCES_LICENCE for p in sources.glob("*.png")})
    say(f"4/4 scoring {chains * (steps + 1)} images with {', '.join(chosen)}")
    score_to_parquet(dataset, chosen, scores, device="cpu", progress=progress)
    done.write_text("ok\n")
    say(f"built the demo set in {root}")
    return dataset, scores


#: What the paper measured on the real chains, for the page (DESIGN.md; arXiv 2604.03400).
REAL_CHAIN_FACTS = (
    "On the paper's real Nano Banana Pro chains no pyiqa metric passed every chain (21 tested); only two "
    "large vision-language judges (VisualQuality-R1, RALI) did. BRISQUE even *improved* on a replicated "
    "chain (34.1 -> -9.8, lower is better) while the static noise grew, and people see that noise by "
    "steps 5-10."
)


def demo_note(explorer: Explorer, chains: int, steps: int, side: int) -> str:
    """The page's plain statement about the simulated demo set: what it is, what failed on it."""
    failed = explorer.failure_sentence() or "no metric scored"
    passed_all = [metric_label(m) for m, r in explorer.results.items()
                  if r["n_failed"] == 0 and r["n_chains"] - r["n_incomplete"] > 0]
    caveat = (f" {', '.join(passed_all)} saw the damage in every simulated chain, which the real chains do not "
              "bear out: the simulation is not the real editor." if passed_all else "")
    return (f"**Simulated demo set** (no internet, so not the real Banana100 chains). {chains} chains of {steps} "
            f"steps made here by the *simulated* editor from drawn sources like the paper's (smooth, noise-free, "
            f"{side} px wide, flat and textured areas). On it: {failed}.{caveat} {REAL_CHAIN_FACTS}")


# ---------------------------------------------------------------------------------------------
# Why it fails: what changed in the image, and what NIQE and BRISQUE look at

WHY_CROP = 320  # the view shows a 1:1 crop this large: shrinking would average the grain away


def _luma(rgb: np.ndarray):
    """HxWx3 uint8 -> 1x1xHxW float64 luminance, MATLAB rgb2gray (what the originals compute on)."""
    import torch

    from banana100.metrics.native import matlab

    x = torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).unsqueeze(0)  # a copy: torch wants writable
    return matlab.rgb2gray(x, uint8=True)


def _flattest_box(y: np.ndarray, size: int) -> tuple[int, int]:
    """Top-left corner of the size x size window (of a 3x3 grid) with the least gradient energy."""
    h, w = y.shape
    gy, gx = np.gradient(y)
    energy = gx * gx + gy * gy
    best, corner = None, (0, 0)
    for top in np.linspace(0, h - size, 3).astype(int):
        for left in np.linspace(0, w - size, 3).astype(int):
            e = float(energy[top:top + size, left:left + size].mean())
            if best is None or e < best:
                best, corner = e, (int(top), int(left))
    return corner


def why_view(reference: np.ndarray, image: np.ndarray, crop: int = WHY_CROP, source: np.ndarray | None = None) -> dict:
    """What a visitor needs to see why the metrics miss the damage, for one step.

    `reference` is step 1 (the protocol's reference), `image` the chosen step, HxWx3 uint8.
    Returns PIL images of one 1:1 crop (the flattest part of step 1, where grain shows first):
    `crop` (the step), `residual` (its high-frequency part minus step 1's: luminance minus its
    7x7 Gaussian local mean, x4 around mid-grey; what changed since step 1) and `mscn` (the
    step's mean-subtracted contrast-normalised coefficients, the map NIQE and BRISQUE compute
    all their features from, `banana100.metrics.native.nss.mscn`), plus `alpha` (shape of the
    generalised Gaussian fitted to the whole image's MSCN coefficients at step 1 and at this
    step, as those metrics fit it: 2 is Gaussian noise, small values a peaky, smooth image),
    `mscn_values` (a sample of both, for the histogram) and `box` (top, left, size) of the crop.
    With `source` (step 0) its shape and sample come too (`source_alpha`, `source_values`).
    A reference of another size (real copies are often cropped) is resized to the step's size first.
    """
    from banana100.metrics.native import matlab, nss

    if reference.shape != image.shape:
        reference = np.asarray(Image.fromarray(reference).resize(image.shape[1::-1], Image.LANCZOS))
    window = matlab.fspecial_gaussian(7, 7 / 6)
    out = {}
    maps = {}
    for name, rgb in (("reference", reference), ("image", image)):
        y = _luma(rgb)[0, 0]
        mu = matlab.imfilter(y, window, "replicate")
        maps[name] = (y, y - mu, nss.mscn(y, window, "replicate"))
    h, w = image.shape[:2]
    size = min(crop, h, w)
    top, left = _flattest_box(maps["reference"][0].numpy(), size)
    box = (slice(top, top + size), slice(left, left + size))

    def grey(x: np.ndarray, gain: float) -> Image.Image:
        return Image.fromarray(np.clip(128 + gain * x + 0.5, 0, 255).astype(np.uint8))

    out["crop"] = Image.fromarray(np.ascontiguousarray(image[box]))
    out["residual"] = grey((maps["image"][1] - maps["reference"][1]).numpy()[box], 4.0)
    out["mscn"] = grey(maps["image"][2].numpy()[box], 40.0)
    alphas, values = [], []
    rng = np.random.default_rng(0)
    for name in ("reference", "image"):
        m = maps[name][2].reshape(1, -1)
        alphas.append(float(nss.estimate_ggd(m)[0][0]))
        flat = m[0].numpy()
        values.append(flat[rng.choice(flat.size, min(flat.size, 200_000), replace=False)])
    out["alpha"] = tuple(alphas)
    out["mscn_values"] = tuple(values)
    out["box"] = (top, left, size)
    out["damage"] = _damage_components(reference, image)
    if source is not None:
        m = nss.mscn(_luma(source)[0, 0], window, "replicate").reshape(1, -1)
        out["source_alpha"] = float(nss.estimate_ggd(m)[0][0])
        flat = m[0].numpy()
        out["source_values"] = flat[rng.choice(flat.size, min(flat.size, 200_000), replace=False)]
    return out


def _damage_components(reference: np.ndarray, image: np.ndarray) -> dict | None:
    """The edit_damage detector's score and components at the reference step and at this step:
    {"score": (ref, step), component: (ref, step), ...}; None for images under its minimum size."""
    from banana100.metrics.engine import to_tensor
    from banana100.metrics.native import edit_damage

    if min(image.shape[:2]) < edit_damage.MIN_SIDE:
        return None
    model = edit_damage.build()
    out: dict[str, list[float]] = {}
    for rgb in (reference, image):
        score = float(model(to_tensor(rgb)[None])[0])
        out.setdefault("score", []).append(score)
        for name, value in model.last_components.items():
            out.setdefault(name, []).append(float(value[0]))
    return {k: tuple(v) for k, v in out.items()}


def damage_table(damage: dict | None, reference_step: int, step: int) -> str:
    """The detector's components at both steps as a markdown table (empty without them)."""
    if not damage:
        return ""
    from banana100.metrics.native.edit_damage import terms

    rows = [f"| what | step {reference_step} | step {step} |", "| --- | --- | --- |"]
    units = {"grain": "levels", "lattice": "correlation", "colour_cast": "levels", "softness": "0-1"}
    for name, (a, b) in damage.items():
        label = "**edit damage** (sum of the terms)" if name == "score" else f"{name} ({units.get(name, '')})"
        rows.append(f"| {label} | {a:.3g} | {b:.3g} |")
    before, after = (terms({c: damage[c][i] for c in units}) for i in (0, 1))
    grew = {c: after[c] - before[c] for c in units}
    main = max(grew, key=grew.get)  # what changed since the reference step, not what the image is
    return ("\n\nThe edit-damage detector (`metrics/edit_damage`, higher = more damage) on the whole image:\n\n"
            + "\n".join(rows) + f"\n\nIts term that grew most from step {reference_step} to step {step}: "
            f"**{main}** ({grew[main]:+.2f}).")


def plot_mscn_histograms(view: dict, reference_step: int, step: int):
    """Histograms of the MSCN coefficients at the reference step and at `step` (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 3.0), dpi=100)
    bins = np.linspace(-3, 3, 121)
    series = list(zip(view["mscn_values"], view["alpha"], (f"step {reference_step}", f"step {step}"),
                      ("0.45", "crimson")))
    if "source_values" in view:
        series.insert(0, (view["source_values"], view["source_alpha"], "step 0 (source)", "tab:blue"))
    for values, alpha, label, colour in series:
        ax.hist(values, bins=bins, density=True, histtype="step", lw=1.8, color=colour,
                label=f"{label}: shape {alpha:.2f}")
    ax.set_yscale("log")
    ax.set_xlabel("MSCN coefficient")
    ax.set_ylabel("density (log)")
    ax.set_title("What NIQE and BRISQUE measure: the shape of this histogram", fontsize=9)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="GGD fit",
              title_fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# What the Space shows


def space_source(env=None) -> str:
    """'dataset' (BANANA100_SPACE_DATASET is set), 'release' (the original release: on the Hub, or
    BANANA100_SPACE_RELEASE is set), or 'demo' (offline: the simulated demo set)."""
    env = os.environ if env is None else env
    if (env.get(DATASET_ENV) or "").strip():
        return "dataset"
    if (env.get(RELEASE_ENV) or "").strip() or (env.get("SPACE_ID") or "").strip():  # SPACE_ID: set on the Hub
        return "release"
    return "demo"


def open_release(spec: ReleaseSpec, cache_dir: str | os.PathLike, metrics, device: str = "cpu") -> Explorer:
    """The original release, chains fetched when shown; scores from the release's published
    scores file when it has one, otherwise computed on demand per chain (`ChainScores`)."""
    images = ReleaseChains(spec, cache_dir)
    published = images.published_scores()
    if published is not None:
        from banana100.report import load_scores

        return Explorer(images, load_scores(published),
                        note=f"Scores: the release's own scores file `{published.name}`.")
    on_demand = ChainScores(images.cache / "scores", device=device)
    return Explorer(images, None, on_demand=on_demand, metrics=metrics,
                    note="Scores are computed when a chain is first shown (then cached): the summary covers "
                         "the chains scored so far.")


# ---------------------------------------------------------------------------------------------
# Live chains (the Space's "Try it")


def check_upload(path: str | os.PathLike, max_bytes: int = 10 * 1024**2, max_pixels: int = 16_000_000,
                 formats=("PNG", "JPEG", "WEBP", "BMP"), min_side: int = 32) -> np.ndarray:
    """Read an uploaded image file safely; UploadError with a plain message when refused.

    `min_side`: the smallest side accepted; the Space passes the largest minimum size of the
    metrics it scores live, so that no curve is missing for a small upload.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        raise UploadError("the upload could not be read; please upload it again") from None
    if size > max_bytes:
        raise UploadError(f"the file is {size / 1024**2:.1f} MB; the limit is {max_bytes / 1024**2:.0f} MB")
    if size == 0:
        raise UploadError("the file is empty")
    from banana100.imageio import load_rgb

    try:
        with Image.open(path) as img:
            fmt, (w, h) = img.format, img.size
    except Exception:  # noqa: BLE001 - PIL raises several types for non-images
        raise UploadError(f"this file is not an image we can read; upload a {', '.join(formats)} image") from None
    if fmt not in formats:
        raise UploadError(f"{fmt} images are not accepted; upload a {', '.join(formats)} image")
    if w * h > max_pixels:
        raise UploadError(f"the image is {w}x{h} = {w * h / 1e6:.1f} megapixels; the limit is {max_pixels / 1e6:.0f} megapixels")
    if min(w, h) < min_side:
        raise UploadError(f"the image is {w}x{h}; it needs at least {min_side} pixels a side")
    try:
        return load_rgb(path)
    except Exception as e:  # noqa: BLE001 - truncated or corrupt files
        raise UploadError(f"the image could not be decoded ({type(e).__name__})") from None


def shrink(rgb: np.ndarray, max_side: int) -> np.ndarray:
    """An HxWx3 uint8 array with its longest side at most `max_side` (Lanczos)."""
    if max(rgb.shape[:2]) <= max_side:
        return rgb
    return np.asarray(_thumbnail(Image.fromarray(rgb), max_side))


# A live chain is named like any other (source "live", repeat 0); the Space runs `replicate`.
LIVE_SOURCE_ID = "live"
LIVE_CHAIN_ID = make_chain_id(LIVE_SOURCE_ID, "replicate", 0)


def stream_chain(editor, image: np.ndarray, steps: int, setting: str = "replicate", seed: int = 0,
                 chain_id: str | None = None) -> Iterator[tuple[int, np.ndarray, dict]]:
    """Yield (step, rgb, metadata) for step 0 (the image) and each of `steps` edits, in memory.

    Each step is made by `banana100.chains.step`, as `generate_chains` makes it in the chain
    `chain_id` (default: the live chain of `setting`) with base seed `seed` (the setting's
    prompt, seed rule and transforms for that step, the stored-PNG round trip), but nothing is
    written to disk.
    """
    from banana100.chains.settings import get_setting
    from banana100.chains.step import edit_request, make_step
    from banana100.imageio import encode_png

    s = get_setting(setting)
    chain_id = chain_id or make_chain_id(LIVE_SOURCE_ID, s.name, 0)
    current = np.ascontiguousarray(image)
    current_bytes = encode_png(current)  # the runner stores step 0 as this PNG and sends its bytes
    yield 0, current, {}
    for k in range(1, int(steps) + 1):
        out = make_step(editor, edit_request(s, k, current, seed, chain_id, image_bytes=current_bytes))
        current, current_bytes = out.rgb, out.data
        yield k, current, out.metadata


def scores_frame(rows: list[dict], chain_id: str = LIVE_CHAIN_ID) -> pd.DataFrame:
    """[{step, metric, score}] -> a scores table (the columns `chain_curves` and `analyse` read)."""
    df = pd.DataFrame(rows, columns=["step", "metric", "score"])
    df["chain_id"] = chain_id
    from banana100.metrics.resolve import resolve

    df["lower_better"] = [resolve(m).lower_better for m in df["metric"]]
    return df


def live_metrics(shown: list[str] | None = None) -> list[str]:
    """The metrics of the Space's live chain and upload scoring: the demo's choice (`pick_metrics
    ("auto")`: the fast hand-crafted metrics whose files are at hand), kept to those `shown` on
    the release's curves when given, so the live curves compare with them; PIQE (no files) at least."""
    from banana100.demo import pick_metrics

    chosen = pick_metrics("auto")
    return [m for m in chosen if not shown or m in shown] or ["piqe"]


def sample_names() -> list[str]:
    """Names of the "Try it" samples: the generated sources, then the bundled photographs."""
    from banana100.demo import SAMPLE_IMAGES
    from banana100.synth import GENERATED_SOURCES

    return [*GENERATED_SOURCES, *(Path(name).stem for name, _ in SAMPLE_IMAGES)]


def sample_image(name: str, side: int = 1024) -> np.ndarray:
    """A sample by name (one of `sample_names()`); never a path from the caller."""
    import skimage.data

    from banana100.demo import SAMPLE_IMAGES
    from banana100.synth import GENERATED_SOURCES, generated_source
    from banana100.imageio import load_rgb

    if name in GENERATED_SOURCES:
        return generated_source(name, side)
    files = {Path(f).stem: f for f, _ in SAMPLE_IMAGES}
    if name not in files:
        raise UploadError(f"unknown sample {name!r}; choose one of {', '.join(sample_names())}")
    return load_rgb(Path(skimage.data.data_dir) / files[name])
