"""`banana100 score`: every image of a run or dataset folder x every metric -> one Parquet file.

Rows are written as they are computed, in small part files beside the output
(`<out>.parts/`), each renamed into place only when complete; the final file merges them.
Rerunning the same command skips every (chain, step, metric) already scored, so an
interrupted run loses at most one chunk. One image that cannot be scored (too small for a
metric, undecodable, over the pixel limit, or with no defined score: a uniform image for a
metric whose statistics need variation, a NaN result) gets a row with a NaN score and an
`error` message saying why; the others go on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from banana100.metrics.engine import check_size
from banana100.errors import Banana100Error, DatasetError, ImageReadError, ImageTooSmallError, ManifestError
from banana100.imageio import decode_ahead, load_rgb
from banana100.chains.manifest import MANIFEST_NAME, image_path, read_manifest
from banana100.fileio import ExclusiveLock, is_temporary_name, read_regular_bytes, sha256_bytes, write_file_atomic

log = logging.getLogger(__name__)

# Identity and context of each scored image, copied from its manifest record.
RECORD_COLUMNS = ("chain_id", "source_id", "setting", "repeat", "chat_mode", "variant", "step", "editor", "model",
                  "sha256", "image", "width", "height")
SCORES_SCHEMA = pa.schema(
    [
        ("chain_id", pa.string()), ("source_id", pa.string()), ("setting", pa.string()), ("repeat", pa.int32()),
        # null chat_mode = the paper's different chat; variant: a release's label (schema.py)
        ("chat_mode", pa.string()), ("variant", pa.string()),
        ("step", pa.int32()), ("editor", pa.string()), ("model", pa.string()), ("sha256", pa.string()),
        ("image", pa.string()), ("width", pa.int32()), ("height", pa.int32()),
        ("metric", pa.string()), ("score", pa.float64()), ("lower_better", pa.bool_()), ("error", pa.string()),
        # how the score was computed: backend "native" | "pyiqa", mode "pyiqa" | "official"
        ("backend", pa.string()), ("mode", pa.string()),
        # hand-crafted metrics (native backend): share of flat windows, where the score depends on
        # rounding (banana100.metrics.native.FlatRegionWarning; the metric cards say how far)
        ("flat_share", pa.float64()),
    ]
)


@dataclass
class ImageItem:
    """One image to score: its manifest fields and how to read its bytes."""

    record: dict
    name: str  # file path (run folder) or dataset path, for messages
    read: Callable[[], bytes]


def image_files(sources) -> list[Path] | None:
    """The image files named by `sources` (files, folders searched recursively, glob patterns),
    in the order given (each folder's and pattern's files sorted); None when `sources` is a run
    or dataset folder (scored as chains). A named file that is not an image, or a folder or
    pattern with no image, is an error naming it, before any work."""
    from banana100.dataset.reader import is_dataset_dir
    from banana100.imageio import IMAGE_SUFFIXES

    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if len(items) == 1 and Path(items[0]).is_dir() and (
            (Path(items[0]) / MANIFEST_NAME).is_file() or is_dataset_dir(Path(items[0]))):
        return None
    found: list[Path] = []
    kinds = ", ".join(IMAGE_SUFFIXES)
    for item in items:
        path = Path(item)
        if path.is_dir():
            if (path / MANIFEST_NAME).is_file() or is_dataset_dir(path):
                raise DatasetError(f"{path} is a run or dataset folder: score it on its own, not with other images")
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DatasetError(f"{path} is neither a run folder (no {MANIFEST_NAME}), a dataset folder (no "
                                   f"README.md with configs) nor a folder of images (none ending in {kinds})")
            found += files
        elif path.is_file():
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                raise DatasetError(f"{path}: not an image file (expected one ending in {kinds})")
            found.append(path)
        elif any(c in str(item) for c in "*?["):
            import glob

            files = sorted(Path(p) for p in glob.glob(str(item), recursive=True)
                           if Path(p).is_file() and Path(p).suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DatasetError(f"{item}: the pattern matches no image file (ending in {kinds})")
            found += files
        else:
            raise DatasetError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))  # a file named twice (by name and by a pattern) is scored once


def iter_items(source) -> tuple[int, Iterator[ImageItem]]:
    """(number of images, iterator of images) of a run folder, a dataset folder, or plain images
    (a folder, a list or a glob of image files: one item each, with no chain or step)."""
    files = image_files(source)
    if files is not None:
        def plain_items():
            for path in files:
                yield ImageItem({"image": str(path)}, str(path), lambda path=path: read_regular_bytes(path))

        return len(files), plain_items()
    source = Path(source if isinstance(source, (str, os.PathLike)) else list(source)[0])
    if (source / MANIFEST_NAME).is_file():
        records = read_manifest(source)
        # image_path refuses a path that leaves the run folder (the rule build-dataset uses too)
        missing = [str(p) for p in (image_path(source, r) for r in records) if not p.exists()]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ManifestError(f"{source / MANIFEST_NAME} lists images that are not on disk: {', '.join(missing[:5])}{more}")

        def run_items():
            for r in records:
                path = image_path(source, r)
                yield ImageItem(r, str(path), lambda path=path, r=r: _checked(read_regular_bytes(path), r))

        return len(records), run_items()

    from banana100.dataset.reader import count_dataset_rows, is_dataset_dir, iter_dataset_records

    if is_dataset_dir(source):
        def dataset_items():
            for record, data in iter_dataset_records(source):
                yield ImageItem(record, f"{source}:{record.get('image') or record['chain_id']}/step {record['step']}",
                                lambda data=data, record=record: _checked(data, record))

        return count_dataset_rows(source), dataset_items()
    if not source.exists():
        raise Banana100Error(f"{source}: no such folder")
    raise DatasetError(f"{source} is neither a run folder (no {MANIFEST_NAME}) nor a dataset folder (no README.md with configs)")


def _checked(data: bytes, record: dict) -> bytes:
    """The image bytes, if they are the ones the manifest (or dataset row) recorded."""
    digest = sha256_bytes(data)
    if record.get("sha256") and digest != record["sha256"]:
        raise ImageReadError(f"its sha256 is {digest[:16]}..., the manifest says {str(record['sha256'])[:16]}...: the "
                             "file changed after it was recorded; not scored")
    return data


def _parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


MERGED_PARTS_KEY = b"banana100.merged_parts"  # the part files a merged scores file already holds


def _merged_parts(out: Path) -> set[str] | None:
    """Names of the part files merged into `out` (recorded in its Parquet metadata by `_merge`);
    None for a file merged by a version before the record."""
    meta = pq.read_schema(out).metadata or {}
    return set(json.loads(meta[MERGED_PARTS_KEY])) if MERGED_PARTS_KEY in meta else None


def _part_files(out: Path) -> list[Path]:
    parts = _parts_dir(out)
    return sorted(parts.glob("part-*.parquet")) if parts.is_dir() else []


def _pending_parts(out: Path) -> list[Path]:
    """The part files not yet merged into `out` (a kill between the merge and the removal of
    the parts folder leaves merged ones behind: they are skipped, never counted twice)."""
    if not out.is_file():
        return _part_files(out)
    merged = _merged_parts(out)
    if merged is not None:
        return [p for p in _part_files(out) if p.name not in merged]
    # merged by an older version, which kept no record: a part whose every row is in `out` was merged
    keyed = ["chain_id", "step", "image", "metric"]
    done = _done_keys(pq.read_table(out, columns=keyed))
    return [p for p in _part_files(out) if not _done_keys(pq.read_table(p, columns=keyed)) <= done]


def read_scores(out: Path) -> pa.Table:
    """Everything scored so far: the merged file plus any part files of an unfinished run.

    A (chain, step, metric) found twice is a state no merge of ours leaves (two runs writing
    at once before locks, a file merged by an older version): it is refused naming the files.
    """
    named: list[tuple[str, pa.Table]] = []
    if out.is_file():
        named.append((str(out), _conform(pq.read_table(out))))
    named += [(str(p), _conform(pq.read_table(p))) for p in _pending_parts(out)]
    if not named:
        return SCORES_SCHEMA.empty_table()
    seen: dict[tuple, str] = {}
    for name, table in named:
        for r in table.select(["chain_id", "step", "image", "metric"]).to_pylist():
            key = _key(r, r["metric"])
            if key in seen:
                where = "twice in " + name if seen[key] == name else f"in {seen[key]} and in {name}"
                what = f"image {key[1]!r}" if key[0] is None else f"chain {key[0]!r} step {key[1]}"
                raise DatasetError(
                    f"{out}: {what} metric {key[2]!r} is scored {where}; the scores cannot be "
                    f"merged without doubling rows. Remove the damaged file (or score into a new --out)")
            seen[key] = name
    return pa.concat_tables([t for _, t in named])


def _conform(table: pa.Table) -> pa.Table:
    """`table` in SCORES_SCHEMA; files from before the backend/mode columns were all pyiqa's."""
    for name in ("backend", "mode"):
        if name not in table.column_names:
            table = table.append_column(name, pa.array(["pyiqa"] * len(table), pa.string()))
    for name, kind in (("flat_share", pa.float64()), ("chat_mode", pa.string()), ("variant", pa.string())):
        if name not in table.column_names:  # files from before the column: not measured / not recorded
            table = table.append_column(name, pa.nulls(len(table), kind))
    return table.select(SCORES_SCHEMA.names).cast(SCORES_SCHEMA)


def _append_texts(path: Path, rows: list[dict]) -> None:
    """Append the rows that carry a generated text (VisualQuality-R1 with keep_text) to `path`."""
    kept = [{"chain_id": r["chain_id"], "step": r["step"], "metric": r["metric"], "score": r["score"],
             "error": r["error"], "text": r["text"]} for r in rows if r.get("text") is not None]
    if kept:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(k, ensure_ascii=False, default=_plain) + "\n" for k in kept)


def _plain(value):
    """numpy scalars (step, score) as Python numbers for JSON."""
    return value.item() if hasattr(value, "item") else str(value)


def _check_same_method(table: pa.Table, scorers: dict, out: Path) -> None:
    """Refuse to resume into `out` with a metric computed another way (backend or mode) before."""
    cols = table.select(["metric", "backend", "mode"]).to_pydict()
    before = set(zip(cols["metric"], cols["backend"], cols["mode"]))
    for metric, backend, mode in sorted(before):
        scorer = scorers.get(metric)
        if scorer is not None and (scorer.backend, scorer.mode) != (backend, mode):
            raise Banana100Error(
                f"{out} already holds {metric} scores computed with backend={backend!r}, mode={mode!r}; "
                f"this run asks for backend={scorer.backend!r}, mode={scorer.mode!r}. "
                "Use another --out, or the same backend and mode to resume."
            )


def _key(record: dict, metric: str) -> tuple:
    """What identifies a scored (image, metric): its chain and step, or a plain image's path."""
    if record.get("chain_id") is None:
        return (None, record.get("image"), metric)
    return (record["chain_id"], record["step"], metric)


def _done_keys(table: pa.Table) -> set[tuple]:
    cols = table.select(["chain_id", "step", "image", "metric"]).to_pylist()
    return {_key(r, r["metric"]) for r in cols}


def _write_part(parts: Path, rows: list[dict], prefix: str = "part-") -> None:
    """Write one part file; each process of a distributed run has its own `prefix` (no clashes).
    A random tail makes each name unique for ever: a merged file lists the parts it holds by name."""
    parts.mkdir(parents=True, exist_ok=True)
    index = len(list(parts.glob(f"{prefix}*.parquet")))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), sink)
    write_file_atomic(parts / f"{prefix}{index:06d}-{uuid.uuid4().hex[:12]}.parquet", sink.getvalue().to_pybytes())


def _merge(out: Path) -> None:
    """Merge the pending parts into `out`, then remove the parts folder.

    `out` records the names of every part it holds, so a kill at any instant leaves a state
    the rerun reads once: before the rename, the old `out` and all parts; after it, the new
    `out` and parts it lists as merged (skipped by `read_scores`).
    """
    merged = {p.name for p in _part_files(out)}  # all of them, after this merge
    table = read_scores(out).sort_by([("metric", "ascending"), ("chain_id", "ascending"), ("step", "ascending")])
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           MERGED_PARTS_KEY: json.dumps(sorted(merged)).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_file_atomic(out, sink.getvalue().to_pybytes())
    shutil.rmtree(_parts_dir(out), ignore_errors=True)


def _drop_temporary_files(out: Path) -> None:
    """Temporary files a killed run left beside `out` and in its parts folder (under the lock)."""
    for folder in (out.parent, _parts_dir(out)):
        if folder.is_dir():
            for f in folder.glob(f".{out.name if folder == out.parent else 'part-'}*"):
                if is_temporary_name(f.name):
                    f.unlink(missing_ok=True)


@dataclass
class Decoded:
    """One image of this process's share, decoded (or why not)."""

    record: dict
    name: str
    needed: list[str]  # metrics still to score; [] for an image already done (progress only)
    rgb: np.ndarray | None = None
    error: str | None = None


def decoded_images(source: Path, metrics: list[str], done: set, rank: int = 0, world: int = 1,
                   workers: int = 0) -> Iterator[Decoded]:
    """This process's images (every `world`-th from `rank`) in order, read and decoded by
    `workers` threads ahead of the scoring (`banana100.imageio.decode_ahead`; 0: in this thread).
    Images already scored come through undecoded (`needed == []`), so the progress bar still
    counts them."""
    _, items = iter_items(source)
    mine = (item for index, item in enumerate(items) if index % world == rank)

    def decode(item: ImageItem) -> Decoded:
        needed = [m for m in metrics if _key(item.record, m) not in done]
        d = Decoded(item.record, item.name, needed)
        if needed:
            data = b""
            try:
                data = item.read()
                d.rgb = load_rgb(data)
                if item.record.get("chain_id") is None:  # a plain image: what a manifest would say
                    d.record = {**item.record, "sha256": sha256_bytes(data),
                                "height": d.rgb.shape[0], "width": d.rgb.shape[1]}
            except (Banana100Error, OSError) as e:  # named by the file, not as "<N bytes>"
                d.error = f"{item.name}: {str(e).removeprefix(f'<{len(data)} bytes>: ')}"
        return d

    decoded = decode_ahead(mine, decode, workers, ahead=4 * max(1, workers), catch=())
    try:
        for _, d in decoded:
            yield d
    finally:
        decoded.close()


def _score_chunk(chunk: list[Decoded], scorers: dict) -> list[dict]:
    """Score each decoded image with every metric it still needs."""
    rows = []
    arrays = [d.rgb for d in chunk]
    decode_errors = [d.error for d in chunk]

    for metric, scorer in scorers.items():
        spec = scorer.spec
        todo = [i for i, d in enumerate(chunk) if metric in d.needed]
        errors: dict[int, str] = {}
        ok = []
        for i in todo:
            if arrays[i] is None:
                errors[i] = decode_errors[i]
            else:
                try:  # the engine's own check, so one too-small image does not fail the chunk
                    check_size(spec, arrays[i], chunk[i].name)
                    ok.append(i)
                except ImageTooSmallError as e:
                    errors[i] = str(e)
        scores: dict[int, float] = {}
        shares: dict[int, float | None] = {}
        texts: dict[int, str | None] = {}  # what a language-model evaluator answered (keep_text)
        try:
            scores.update(zip(ok, scorer.score_arrays([arrays[i] for i in ok], [chunk[i].name for i in ok])))
            shares.update(zip(ok, scorer.flat_shares))
            texts.update(zip(ok, getattr(scorer, "last_texts", ())))
        except Exception as e:  # noqa: BLE001 - isolate the image that failed; the others go on
            if isinstance(e, Banana100Error) and getattr(e, "errors", None) is not None:
                # some images have no score (uniform, NaN): the engine scored the others and named each
                texts.update(zip(ok, getattr(scorer, "last_texts", ())))
                for k, i in enumerate(ok):
                    if k in e.errors:
                        errors[i] = str(e.errors[k])  # named by chunk[i].name already
                    else:
                        scores[i], shares[i] = e.scores[k], scorer.flat_shares[k]
            else:
                for i in ok:
                    try:
                        scores[i] = scorer.score_arrays([arrays[i]], [chunk[i].name])[0]
                        shares[i] = scorer.flat_shares[0]
                        texts.update(zip([i], getattr(scorer, "last_texts", ())))
                    except Banana100Error as e1:  # reported in the `error` column, named already
                        errors[i] = str(e1)
                    except Exception as e1:  # noqa: BLE001 - reported in the `error` column
                        errors[i] = f"{chunk[i].name}: {type(e1).__name__}: {e1}"
        for i in todo:
            record = chunk[i].record
            rows.append({
                **{c: record.get(c) for c in RECORD_COLUMNS},
                "metric": metric,
                "score": scores.get(i, float("nan")),
                "lower_better": spec.lower_better,
                "error": errors.get(i),
                "backend": scorer.backend,
                "mode": scorer.mode,
                "flat_share": shares.get(i),
                **({"text": texts[i]} if texts.get(i) is not None else {}),  # not a column: the texts file
            })
    return rows


#: `banana100 score` without --metrics: these, where their files are at hand (PIQE needs none).
DEFAULT_METRICS = ("piqe", "niqe", "brisque")


def metrics_at_hand(candidates) -> list[str]:
    """The `candidates` whose files are all present locally (no download), in order; each one left
    out is logged (a warning) with its missing files."""
    from banana100.metrics.weights import ENV_VAR, missing

    chosen = []
    for m in candidates:
        absent = missing(m)
        if absent:
            log.warning("skipping %s: %s not found locally (put it in $%s, or run `banana100 weights download %s` "
                        "online)", m, ", ".join(absent), ENV_VAR, m)
        else:
            chosen.append(m)
    return chosen


def check_metrics_ready(metrics: list[str], backend: str | None = None) -> None:
    """Before any work: every metric's extra is installed and every file present (no download
    when offline). One error, on one line, names every missing extra and every missing file of
    every metric; the metrics that are ready are named too."""
    from banana100 import extras
    from banana100.errors import MissingExtraError, WeightsNotFoundError
    from banana100.metrics.resolve import PYIQA_PREFIX, resolve
    from banana100.metrics.weights import ENV_VAR, _hub_unreachable, missing, offline

    need_extra, lacking = {}, {}  # metric -> the extra it lacks / its files not at hand
    for m in metrics:
        r = resolve(m)
        if r.kind == "module":  # a user's evaluate module: loaded and probed when it was resolved
            continue
        if r.kind == "pyiqa":  # pyiqa fetches its own weights
            extra = "deep"
        else:
            b = "pyiqa" if m.startswith(PYIQA_PREFIX) else (backend if r.kind == "table" else None)
            extra = None if r.spec.check_backend(b) == "native" else r.spec.extra
            files = missing(r.spec.name, b)
            if files:
                lacking[m] = files
        if extra and not extras.extra_installed(extra):
            need_extra[m] = extra
    if lacking and not offline() and not _hub_unreachable():
        lacking = {}  # online: the engine downloads what is missing (one quick probe says so)
    if not need_extra and not lacking:
        return
    ready = [m for m in metrics if m not in lacking and m not in need_extra]
    parts = []
    for extra in dict.fromkeys(need_extra.values()):
        names = [m for m, e in need_extra.items() if e == extra]
        parts.append(f"{', '.join(names)} need{'s' if len(names) == 1 else ''} the '{extra}' extra "
                     f"({extras.install_hint(extra)})")
    if lacking:
        parts.append("missing files: " + "; ".join(f"{m}: {', '.join(files)}" for m, files in lacking.items())
                     + f" (put them in ${ENV_VAR}; `banana100 weights list {' '.join(lacking)} -v` says where "
                     f"each comes from, `banana100 weights download {' '.join(lacking)}` fetches them online)")
    message = "; ".join(parts) + (f"; ready: {', '.join(ready)}" if ready else "")
    raise (MissingExtraError if need_extra else WeightsNotFoundError)(message)


def build_scorers(metrics: list[str], device: str | None = None, batch_size: int = 8,
                  backend: str | None = None, mode: str = "pyiqa", **options) -> dict:
    """Load every metric before any work, so a missing parameter file stops the run at once.

    `metrics` are any names `banana100.metrics.resolve` knows (the table, `pyiqa:<id>`, a user's
    evaluate module). `backend=None` gives each metric its default backend; "pyiqa" forces pyiqa
    for the table's metrics (evaluators and user metrics keep their own). `mode="official"`
    applies to the metrics that have it (native backend). `options` (max_pixels, keep_text)
    go to VisualQuality-R1.
    """
    from banana100.metrics.resolve import make_scorer, resolve

    resolved = [resolve(m) for m in metrics]
    plain = [r.name for r in resolved if "native" not in r.spec.backends]
    if mode == "official" and backend != "pyiqa" and plain:
        log.warning("no official mode for %s; those are scored in pyiqa mode (the `mode` column says which)",
                    ", ".join(plain))
    return {r.name: make_scorer(r.name, device=device, batch_size=batch_size,
                                backend=backend if r.kind == "table" else None,
                                mode=mode if r.name not in plain else "pyiqa",
                                **(options if r.kind == "evaluator" else {})) for r in resolved}


class _Processes:
    """This process's place in a distributed run (`accelerate launch` or `torchrun`), or a lone one.

    accelerate's PartialState reads the launcher's environment (RANK, WORLD_SIZE, ...); it
    gives the rank, the process count and a barrier. With one process nothing is imported.
    """

    def __init__(self, device: str | None):
        self.rank, self.world, self.local_rank, self._state = 0, 1, 0, None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import PartialState

            import torch

            cpu = device == "cpu" or (device is None and not torch.cuda.is_available())
            self._state = PartialState(cpu=cpu)
            self.rank, self.world = self._state.process_index, self._state.num_processes
            self.local_rank = self._state.local_process_index

    def device(self, device: str | None) -> str | None:
        """One GPU per process: 'cuda' (or the default) becomes 'cuda:<local rank>'."""
        import torch

        if self.world > 1 and device in (None, "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return device

    def barrier(self) -> None:
        if self._state is not None:
            self._state.wait_for_everyone()


def score_to_parquet(
    source: str | os.PathLike,
    metrics: list[str],
    out: str | os.PathLike,
    device: str | None = None,
    batch_size: int = 8,
    chunk_size: int = 32,
    progress: bool = True,
    decode_workers: int | None = None,
    backend: str | None = None,
    mode: str = "pyiqa",
    keep_text: bool = False,
    max_pixels: int | None = None,
) -> Path:
    """Score every image of `source` with `metrics` into `out`; resumes where a previous run stopped.

    `source`: a run folder, a dataset folder, or plain images: a folder of them (searched
    recursively), image files, glob patterns, or a list of these. Plain images get one row per
    (image, metric) with `image` = the path and no chain columns (chain_id and step are null).

    Under `accelerate launch -m banana100 score ...` (or `torchrun -m banana100 score ...`)
    each process takes every n-th image, writes its own part files, and process 0 merges all
    of them into `out` once every process is done. `decode_workers` threads read and decode
    the images ahead of the scoring (default: up to 4; 0 decodes in this thread).
    `keep_text` (VisualQuality-R1) appends what the model answered for each image to
    `<out>.texts.jsonl` (one per process in a distributed run); `max_pixels` sets its image size.
    """
    out = Path(out)
    if not isinstance(source, (str, os.PathLike)):
        source = list(source)
        source = source[0] if len(source) == 1 else source
    if out.suffix != ".parquet":
        raise Banana100Error(f"{out}: the scores file must end in .parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    procs = _Processes(device)
    total, _ = iter_items(source)  # checks the source before any model is built
    check_metrics_ready(metrics, backend)  # every missing extra and file, in one message
    # the same kind of lock as `generate`: a second run on the same --out refuses (each process of
    # a distributed run holds its rank's lock, so two distributed runs on one --out refuse too)
    lock = out.with_name(f".{out.name}.lock" + (f".rank{procs.rank}" if procs.rank else ""))
    with ExclusiveLock(lock, out, "banana100 score", remove=True):
        if procs.rank == 0:
            _drop_temporary_files(out)
        return _score_locked(source, metrics, out, device, batch_size, chunk_size, progress, decode_workers,
                             backend, mode, procs, total, keep_text, max_pixels)


def _score_locked(source, metrics, out: Path, device, batch_size, chunk_size, progress, decode_workers, backend,
                  mode, procs: "_Processes", total: int, keep_text: bool, max_pixels: int | None) -> Path:
    options = {"keep_text": keep_text, **({"max_pixels": max_pixels} if max_pixels else {})}
    scorers = build_scorers(metrics, device=procs.device(device), batch_size=batch_size, backend=backend, mode=mode,
                            **options)
    metrics = list(scorers)  # the resolved names, as the `metric` column writes them
    texts_file = Path(f"{out}.texts.jsonl" if procs.world == 1 else f"{out}.texts.rank{procs.rank:03d}.jsonl")
    before = read_scores(out)
    _check_same_method(before, scorers, out)
    done = _done_keys(before)
    parts = _parts_dir(out)
    prefix = "part-" if procs.world == 1 else f"part-rank{procs.rank:03d}-"
    procs.barrier()  # every process has read what is done before anyone writes
    if procs.world > 1:
        log.info("process %d/%d scores every %dth image from #%d", procs.rank, procs.world, procs.world, procs.rank)

    n_errors = 0
    chunk: list[Decoded] = []
    share = total // procs.world + (procs.rank < total % procs.world)
    bar = tqdm(total=share, unit="img", desc="scoring", disable=not progress or procs.rank != 0, file=sys.stderr)
    workers = decode_workers if decode_workers is not None else min(4, os.cpu_count() or 1)
    images = decoded_images(source, metrics, done, procs.rank, procs.world, workers)

    def flush():
        nonlocal n_errors
        if chunk:
            rows = _score_chunk(chunk, scorers)
            n_errors += sum(r["error"] is not None for r in rows)
            _write_part(parts, rows, prefix)
            _append_texts(texts_file, rows)
            bar.update(len(chunk))
            chunk.clear()

    try:
        for d in images:
            if not d.needed:
                bar.update(1)
                continue
            chunk.append(d)
            if len(chunk) >= chunk_size:
                flush()
        flush()
    finally:
        bar.close()
        images.close()  # stops the decoding threads, also after an interruption
    procs.barrier()
    if procs.rank == 0:
        _merge(out)
    procs.barrier()
    if n_errors:
        warnings.warn(f"{n_errors} (image, metric) pairs could not be scored; see the `error` column of {out}",
                      stacklevel=3)
    return out
