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

Orientation and verdicts come from `banana100.protocol` (through `banana100.report.analyse`);
nothing here re-implements them. `build_demo_set` makes a small offline set (sample images,
simulated editor, fast metrics) with the same functions `banana100 demo` uses.
"""

from __future__ import annotations

import io
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from . import about
from .errors import Banana100Error, DatasetError, ImageReadError
from .protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP
from .registry import METRICS

#: Environment variables the Space reads (see `SpaceConfig.from_env`).
DATASET_ENV = "BANANA100_SPACE_DATASET"  # a dataset folder, a run folder, or a Hub dataset id
SCORES_ENV = "BANANA100_SPACE_SCORES"  # a scores Parquet file (`banana100 score`), or hf://datasets/<id>/<file>
CACHE_ENV = "BANANA100_SPACE_CACHE"  # where the demo set (and Hub downloads) go
DEFAULT_CACHE = Path.home() / ".cache" / "banana100-space"

DISPLAY_SIDE = 768  # longest side of the images shown
_THUMB_QUALITY = 95


class UploadError(Banana100Error):
    """An uploaded file the Space refuses (not an image, too large, too many pixels)."""


def metric_label(metric: str) -> str:
    spec = METRICS.get(metric)
    return spec.display_name if spec else metric


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
        from .dataset_io import is_dataset_dir
        from .manifest import MANIFEST_NAME

        path = Path(location)
        if (path / MANIFEST_NAME).is_file():
            return _run_folder(path)
        if is_dataset_dir(path):
            from fsspec.implementations.local import LocalFileSystem

            from .dataset_io import dataset_files

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
    from .manifest import image_path, read_manifest

    records = read_manifest(run_dir)
    paths = {(r["chain_id"], int(r["step"])): image_path(run_dir, r) for r in records}

    def load(chain_id):
        return {s: p.read_bytes() for (c, s), p in paths.items() if c == chain_id}

    return ChainImages(str(run_dir), "run folder", _infos(records), load)


_INDEX_COLUMNS = ["chain_id", "source_id", "setting", "repeat", "step"]


def _dataset(location: str, kind: str, fs, files: list[str]) -> ChainImages:
    """Index the record columns of Parquet `files` on filesystem `fs`; read images per chain."""
    import pyarrow.parquet as pq

    records = []
    where: dict[str, list[tuple[int, int, int, int]]] = {}  # chain -> [(file, row group, row in group, step)]
    for fi, name in enumerate(files):
        with fs.open(name, "rb") as f:
            pf = pq.ParquetFile(f)
            cols = pf.read(columns=_INDEX_COLUMNS).to_pydict()  # one read of the small columns
            sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
        row = 0
        for g, n in enumerate(sizes):
            for j in range(n):
                rec = {c: cols[c][row + j] for c in _INDEX_COLUMNS}
                records.append(rec)
                where.setdefault(rec["chain_id"], []).append((fi, g, j, int(rec["step"])))
            row += n
    if not records:
        raise DatasetError(f"{location}: the dataset has no rows")

    def load(chain_id):
        out: dict[int, bytes] = {}
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for fi, g, j, step in where.get(chain_id, []):
            groups.setdefault((fi, g), []).append((j, step))
        for (fi, g), rows in sorted(groups.items()):
            with fs.open(files[fi], "rb") as f:
                column = pq.ParquetFile(f).read_row_group(g, columns=["image"]).column("image")
                images = column.combine_chunks().field("bytes")
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

    from .dataset_io import _card_configs, _patterns

    try:
        card = hf_hub_download(repo_id, "README.md", repo_type="dataset",
                               cache_dir=None if cache_dir is None else str(Path(cache_dir) / "hub"))
    except Exception as e:  # noqa: BLE001 - offline, not found, gated: say which
        raise DatasetError(f"cannot read the card of the Hub dataset {repo_id!r} ({type(e).__name__}: {e})") from None
    configs = _card_configs(Path(card).parent)
    if not configs:
        raise DatasetError(f"Hub dataset {repo_id!r}: its card has no YAML `configs` (not a Banana100 dataset layout)")
    by_name = {c["config_name"]: c for c in configs}
    config = by_name.get("default") or configs[0]
    fs = HfFileSystem()
    root = f"datasets/{repo_id}"
    files: set[str] = set()
    for pattern in _patterns(config.get("data_files")):
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            raise DatasetError(f"Hub dataset {repo_id!r}: data_files pattern {pattern!r} leaves the repository")
        files.update(p for p in fs.glob(f"{root}/{pattern}") if p.endswith(".parquet"))
    if not files:
        raise DatasetError(f"Hub dataset {repo_id!r}: config {config['config_name']!r} has no Parquet files")
    return _dataset(f"hf://{root}", "Hub dataset", fs, sorted(files))


# ---------------------------------------------------------------------------------------------
# Scores: curves, verdicts, summary


def load_scores_any(location: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """A scores table (`banana100 score`) from a local path or `hf://datasets/<owner>/<name>/<file>`."""
    from .report import load_scores

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
    """A set of chains (images) and their scores, ready to show."""

    def __init__(self, images: ChainImages, scores: pd.DataFrame | None, note: str = ""):
        from .report import analyse

        self.images = images
        self.scores = scores
        self.note = note
        self.results = analyse(scores) if scores is not None and len(scores) else {}

    @classmethod
    def open(cls, data: str | os.PathLike, scores: str | os.PathLike | None = None,
             cache_dir: str | os.PathLike | None = None, note: str = "") -> Explorer:
        images = ChainImages.open(data, cache_dir=cache_dir)
        table = load_scores_any(scores, cache_dir) if scores else None
        return cls(images, table, note)

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

    def curves(self, chain_id: str) -> pd.DataFrame:
        if self.scores is None:
            return chain_curves(pd.DataFrame(columns=["chain_id", "metric", "step", "score", "lower_better"]), chain_id)
        return chain_curves(self.scores, chain_id)

    def metrics(self) -> list[str]:
        return list(self.results)

    def verdicts(self, chain_id: str) -> pd.DataFrame:
        return verdict_table(self.results, chain_id)

    def summary(self) -> pd.DataFrame:
        return summary_table(self.results)

    def editors(self) -> list[str]:
        if self.scores is None or "editor" not in self.scores:
            return []
        return sorted(self.scores["editor"].dropna().unique())


# ---------------------------------------------------------------------------------------------
# The demo set


def build_demo_set(cache_dir: str | os.PathLike, chains: int = 3, steps: int = 20, metrics: str = "auto",
                   max_side: int | None = 384, progress: bool = False) -> tuple[Path, Path]:
    """Make (or reuse) a small offline set in `cache_dir`: (dataset folder, scores file).

    Sample images (`demo.SAMPLE_IMAGES`, shrunk to `max_side`) -> simulated-editor chains ->
    a dataset folder -> scores of `metrics` ("auto": PIQE plus NIQE and BRISQUE when their
    parameter files are at hand). Each stage resumes; a finished set is reused as is.
    """
    from .dataset_script.build import build_dataset
    from .demo import pick_metrics, sample_sources
    from .editors import make_editor
    from .runner import generate_chains
    from .scoring import score_to_parquet

    root = Path(cache_dir) / f"demo-{chains}x{steps}-{max_side or 'full'}"
    dataset, scores = root / "dataset", root / "scores.parquet"
    done = root / "DONE"
    if done.is_file() and dataset.is_dir() and scores.is_file():
        return dataset, scores
    chosen = pick_metrics(metrics)
    if not chosen:
        raise Banana100Error("no metric available for the demo set")
    sources = sample_sources(root / "originals", chains)
    if max_side:
        small = root / "sources"
        small.mkdir(parents=True, exist_ok=True)
        for p in sorted(sources.iterdir()):
            target = small / (p.stem + ".png")
            if not target.exists():
                with Image.open(p) as img:
                    _thumbnail(img, max_side).save(target)
        sources = small
    run_dir = root / "run"
    generate_chains(make_editor("simulated"), sources=sources, setting="replicate", steps=steps, repeats=1,
                    out_dir=run_dir, progress=progress)
    if not dataset.is_dir():
        build_dataset([run_dir], dataset)
    score_to_parquet(dataset, chosen, scores, device="cpu", progress=progress)
    done.write_text("ok\n")
    return dataset, scores


# ---------------------------------------------------------------------------------------------
# Live chains (the Space's "Try it")


def check_upload(path: str | os.PathLike, max_bytes: int = 10 * 1024**2, max_pixels: int = 16_000_000,
                 formats=("PNG", "JPEG", "WEBP", "BMP")) -> np.ndarray:
    """Read an uploaded image file safely; UploadError with a plain message when refused."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        raise UploadError("the upload could not be read; please upload it again") from None
    if size > max_bytes:
        raise UploadError(f"the file is {size / 1024**2:.1f} MB; the limit is {max_bytes / 1024**2:.0f} MB")
    if size == 0:
        raise UploadError("the file is empty")
    from .imageio import load_rgb

    try:
        with Image.open(path) as img:
            fmt, (w, h) = img.format, img.size
    except Exception:  # noqa: BLE001 - PIL raises several types for non-images
        raise UploadError(f"this file is not an image we can read; upload a {', '.join(formats)} image") from None
    if fmt not in formats:
        raise UploadError(f"{fmt} images are not accepted; upload a {', '.join(formats)} image")
    if w * h > max_pixels:
        raise UploadError(f"the image is {w}x{h} = {w * h / 1e6:.1f} megapixels; the limit is {max_pixels / 1e6:.0f} megapixels")
    if min(w, h) < 32:
        raise UploadError(f"the image is {w}x{h}; it needs at least 32 pixels a side")
    try:
        return load_rgb(path)
    except Exception as e:  # noqa: BLE001 - truncated or corrupt files
        raise UploadError(f"the image could not be decoded ({type(e).__name__})") from None


def shrink(rgb: np.ndarray, max_side: int) -> np.ndarray:
    """An HxWx3 uint8 array with its longest side at most `max_side` (Lanczos)."""
    if max(rgb.shape[:2]) <= max_side:
        return rgb
    return np.asarray(_thumbnail(Image.fromarray(rgb), max_side))


def stream_chain(editor, image: np.ndarray, steps: int, setting: str = "replicate", seed: int = 0,
                 chain_id: str = "live__replicate__r0") -> Iterator[tuple[int, np.ndarray, dict]]:
    """Yield (step, rgb, metadata) for step 0 (the image) and each of `steps` edits, in memory.

    Each step is made exactly as `banana100.runner` makes it (the setting's prompt for that
    step, the seed `runner.step_seed(seed, chain_id, step)`, the stored-image round trip), but
    nothing is written to disk.
    """
    from .editors.base import EditRequest
    from .runner import _result_image, step_seed
    from .settings import get_setting

    s = get_setting(setting)
    current = np.ascontiguousarray(image)
    yield 0, current, {}
    for k in range(1, int(steps) + 1):
        request = EditRequest(image=current, prompt=s.prompt(k), seed=step_seed(seed, chain_id, k),
                              config=dict(s.config), simulate=dict(s.simulate), step=k)
        result = editor.edit(request)
        _, current = _result_image(result)
        yield k, current, dict(result.metadata or {})


def scores_frame(rows: list[dict], chain_id: str = "live__replicate__r0") -> pd.DataFrame:
    """[{step, metric, score}] -> a scores table (the columns `chain_curves` and `analyse` read)."""
    df = pd.DataFrame(rows, columns=["step", "metric", "score"])
    df["chain_id"] = chain_id
    df["lower_better"] = [METRICS[m].lower_better if m in METRICS else False for m in df["metric"]]
    return df


SIMULATED_NOTE = about.SIMULATED_EDITOR_NOTE


def sample_names() -> list[str]:
    """Names of the bundled sample images (`demo.SAMPLE_IMAGES`), without extension."""
    from .demo import SAMPLE_IMAGES

    return [Path(name).stem for name, _ in SAMPLE_IMAGES]


def sample_image(name: str) -> np.ndarray:
    """A bundled sample image by name (one of `sample_names()`); never a path from the caller."""
    import skimage.data

    from .demo import SAMPLE_IMAGES
    from .imageio import load_rgb

    files = {Path(f).stem: f for f, _ in SAMPLE_IMAGES}
    if name not in files:
        raise UploadError(f"unknown sample {name!r}; choose one of {', '.join(files)}")
    return load_rgb(Path(skimage.data.data_dir) / files[name])
