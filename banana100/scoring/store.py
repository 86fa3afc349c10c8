"""The scores file and its part files: schema, resume keys, atomic parts, the merge that never
doubles a row and drops the stale rows of plain images (docs/data-safety.md)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from banana100.errors import DatasetError, UsageError
from banana100.fileio import is_temporary_name, write_file_atomic
from banana100.metrics.detector.model import ALL_COMPONENTS
from banana100.scoring import provenance
from banana100.scoring.inputs import canonical_image_path

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
        # how the score was computed: backend "native" | "pyiqa", mode "pyiqa" | "official",
        # precision "exact" | "fast" (banana100.metrics.precision; files from before it: "exact")
        ("backend", pa.string()), ("mode", pa.string()), ("precision", pa.string()),
        # hand-crafted metrics (native backend): share of flat windows, where the score depends on
        # rounding (banana100.metrics.native.FlatRegionWarning; the metric cards say how far)
        ("flat_share", pa.float64()),
        # what the score is made of, per image: the edit_damage detector's components (edit_damage_rel: what
        # each added since the reference, and its own colour_softness since version 11; docs/edit-damage.md); null
        # for every other metric
        ("components", pa.struct([(c, pa.float64()) for c in ALL_COMPONENTS])),
        # what else made the score: the metric's version (the metric table's), and for a metric scored
        # against a reference (edit_damage_rel) that reference's path and sha256 (scoring/provenance.py)
        *provenance.COLUMNS,
    ]
)



def parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


MERGED_PARTS_KEY = b"banana100.merged_parts"  # the part files a merged scores file already holds


def _merged_parts(out: Path) -> set[str] | None:
    """Names of the part files merged into `out` (recorded in its Parquet metadata by `merge_parts`);
    None for a file merged by a version before the record."""
    meta = pq.read_schema(out).metadata or {}
    return set(json.loads(meta[MERGED_PARTS_KEY])) if MERGED_PARTS_KEY in meta else None


def part_files(out: Path) -> list[Path]:
    """The part files in the order they were written (the newest last: `drop_stale_plain_rows`)."""
    parts = parts_dir(out)
    files = list(parts.glob("part-*.parquet")) if parts.is_dir() else []
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def pending_parts(out: Path) -> list[Path]:
    """The part files not yet merged into `out` (a kill between the merge and the removal of
    the parts folder leaves merged ones behind: they are skipped, never counted twice)."""
    if not out.is_file():
        return part_files(out)
    merged = _merged_parts(out)
    if merged is not None:
        return [p for p in part_files(out) if p.name not in merged]
    # merged by an older version, which kept no record: a part whose every row is in `out` was merged (a row
    # scored again against another reference is not: its reference's sha256 is part of what is compared)
    def rows(path: Path) -> set[tuple]:
        t = _conform(pq.read_table(path))
        return {(*score_key(r, r["metric"]), r["reference_sha256"])
                for r in t.select(["chain_id", "step", "image", "sha256", "metric", "reference_sha256"]).to_pylist()}

    done = rows(out)
    return [p for p in part_files(out) if not rows(p) <= done]


def read_scores(out: Path) -> pa.Table:
    """Everything scored so far: the merged file plus any part files of an unfinished run.

    A (chain, step, metric) found twice is a state no merge of ours leaves (two runs writing
    at once before locks, a file merged by an older version): it is refused naming the files.
    A plain image found twice (one file under two names, from a version before one canonical
    path) is left to the merge, which keeps its newest row (`drop_stale_plain_rows`).
    """
    named: list[tuple[str, pa.Table]] = []
    if out.is_file():
        named.append((str(out), _conform(pq.read_table(out))))
    named += [(str(p), _conform(pq.read_table(p))) for p in pending_parts(out)]
    if not named:
        return SCORES_SCHEMA.empty_table()
    seen: dict[tuple, tuple[str, dict]] = {}
    for name, table in named:
        for r in table.select(["chain_id", "step", "image", "sha256", "metric", "reference_sha256"]).to_pylist():
            key = score_key(r, r["metric"])
            # a row scored again against another reference supersedes the older one (provenance.py)
            if key in seen and key[0] is not None and not provenance.differ(seen[key][1], r):
                where = "twice in " + name if seen[key][0] == name else f"in {seen[key][0]} and in {name}"
                what = f"image {key[1]!r}" if key[0] is None else f"chain {key[0]!r} step {key[1]}"
                raise DatasetError(
                    f"{out}: {what} metric {key[-1]!r} is scored {where}; the scores cannot be "
                    f"merged without doubling rows. Remove the damaged file (or score into a new --out)")
            seen[key] = (name, r)
    return pa.concat_tables([t for _, t in named])


def _conform(table: pa.Table) -> pa.Table:
    """`table` in SCORES_SCHEMA; files from before the backend/mode columns were all pyiqa's."""
    for name in ("backend", "mode"):
        if name not in table.column_names:
            table = table.append_column(name, pa.array(["pyiqa"] * len(table), pa.string()))
    if "precision" not in table.column_names:  # before precision="fast" existed every score was exact
        table = table.append_column("precision", pa.array(["exact"] * len(table), pa.string()))
    table = provenance.with_versions(table)
    for name in ("flat_share", "chat_mode", "variant", "components", "reference", "reference_sha256"):
        if name not in table.column_names:  # files from before the column: not measured / not recorded
            table = table.append_column(name, pa.nulls(len(table), SCORES_SCHEMA.field(name).type))
    return table.select(SCORES_SCHEMA.names).cast(SCORES_SCHEMA)


def append_texts(path: Path, rows: list[dict]) -> None:
    """Append the rows that carry a generated text (VisualQuality-R1 with keep_text) to `path`."""
    kept = [{"chain_id": r["chain_id"], "step": r["step"], "metric": r["metric"], "score": r["score"],
             "error": r["error"], "text": r["text"]} for r in rows if r.get("text") is not None]
    if kept:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(k, ensure_ascii=False, default=_plain) + "\n" for k in kept)


def _plain(value):
    """numpy scalars (step, score) as Python numbers for JSON."""
    return value.item() if hasattr(value, "item") else str(value)


def score_key(record: dict, metric: str) -> tuple:
    """What identifies a scored (image, metric): its chain and step, or a plain image's path (in its
    canonical form) and bytes, so that a plain image changed on disk is scored again."""
    if record.get("chain_id") is None:
        return (None, _plain_path(record.get("image")), record.get("sha256"), metric)
    return (record["chain_id"], record["step"], metric)


def _plain_path(image: str | None) -> str | None:
    """A stored plain image path in canonical form: `score` writes it so (absolute); a relative one
    comes from a file written before, taken from the current folder."""
    return image if image is None or os.path.isabs(image) else canonical_image_path(image)


def drop_stale_plain_rows(table: pa.Table, scope: list[str], out: Path) -> pa.Table:
    """`table` (oldest rows first) without the stale rows of plain images, their paths canonical.

    Stale: a row of an image scored again since with other bytes (the file changed: the newest
    row's sha256 wins, for every metric), an older row of the same image, bytes and metric (one
    file under two names, from a version before one canonical path), and a row of an image gone
    from disk that lies in a folder of this run's `scope` (`inputs.plain_scope`). Rows of other
    images stay, so scoring a few images into an existing file adds to it. The count is logged.
    """
    cols = table.select(["chain_id", "image", "sha256", "metric"]).to_pydict()
    plain = [i for i, chain in enumerate(cols["chain_id"]) if chain is None]
    if not plain:
        return table
    images = list(cols["image"])
    for i in plain:
        images[i] = _plain_path(images[i])
    newest = {images[i]: cols["sha256"][i] for i in plain}
    last = {(images[i], cols["sha256"][i], cols["metric"][i]): i for i in plain}
    changed = {i for i in plain if cols["sha256"][i] != newest[images[i]]}
    doubled = {i for i in plain if i not in changed and last[images[i], cols["sha256"][i], cols["metric"][i]] != i}
    gone = {i for i in plain if i not in changed | doubled and _in_scope(images[i], scope)
            and not os.path.exists(images[i])}
    said = [f"{len(changed)} row(s) of images whose bytes changed since (scored again)" if changed else "",
            f"{len(doubled)} row(s) doubled by one image named two ways" if doubled else "",
            f"{len(gone)} row(s) of {len({images[i] for i in gone})} image(s) no longer on disk in the folders "
            "scored" if gone else ""]
    if changed or doubled or gone:
        log.info("%s: dropped %s", out, " and ".join(x for x in said if x))
    table = table.set_column(table.schema.get_field_index("image"), "image", pa.array(images, pa.string()))
    keep = [i for i in range(len(images)) if i not in changed and i not in doubled and i not in gone]
    return table if len(keep) == len(images) else table.take(pa.array(keep, pa.int64()))


def of_this_run(rows: list[dict], ids: tuple[str, set]) -> list[bool]:
    """For each row (with `chain_id` and `image`), whether it is of an image of this run (`inputs.source_ids`)."""
    column, mine = ids
    if column == "image":
        return [r["chain_id"] is None and _plain_path(r["image"]) in mine for r in rows]
    return [r["chain_id"] in mine for r in rows]


def say_other_rows(table: pa.Table, ids: tuple[str, set], out: Path) -> None:
    """One line when `out` already holds rows of images this run does not score (another folder's): the
    rows of this run are added to them, in one file (a mistyped --out looked like a bigger run)."""
    rows = table.select(["chain_id", "image"]).to_pylist()
    other = [r for r, mine in zip(rows, of_this_run(rows, ids), strict=True) if not mine]
    if other:
        images = len({(r["chain_id"], r["image"]) if r["chain_id"] is None else r["chain_id"] for r in other})
        what = "image(s)" if ids[0] == "image" else "chain(s)"
        log.warning("%s already holds %d row(s) of %d %s that this run does not score: this run's rows are added to "
                    "that file (its table counts this run's images only); give a new --out to keep them apart",
                    out, len(other), images, what)


def _in_scope(image: str, scope: list[str]) -> bool:
    return any(image.startswith(folder.rstrip(os.sep) + os.sep) for folder in scope)


def write_part(parts: Path, rows: list[dict], prefix: str = "part-") -> None:
    """Write one part file; each process of a distributed run has its own `prefix` (no clashes).
    A random tail makes each name unique for ever: a merged file lists the parts it holds by name."""
    parts.mkdir(parents=True, exist_ok=True)
    index = len(list(parts.glob(f"{prefix}*.parquet")))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), sink)
    write_file_atomic(parts / f"{prefix}{index:06d}-{uuid.uuid4().hex[:12]}.parquet", sink.getvalue().to_pybytes())


def merge_parts(out: Path, scope: list[str] = ()) -> None:
    """Merge the pending parts into `out`, without stale plain-image rows (`drop_stale_plain_rows`,
    `scope`: the folders this run scored), then remove the parts folder.

    `out` records the names of every part it holds, so a kill at any instant leaves a state
    the rerun reads once: before the rename, the old `out` and all parts; after it, the new
    `out` and parts it lists as merged (skipped by `read_scores`).
    """
    merged = {p.name for p in part_files(out)}  # all of them, after this merge
    table = provenance.drop_superseded(read_scores(out), score_key)
    table = drop_stale_plain_rows(table, list(scope), out)
    table = table.sort_by([("metric", "ascending"), ("chain_id", "ascending"), ("step", "ascending")])
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           MERGED_PARTS_KEY: json.dumps(sorted(merged)).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_file_atomic(out, sink.getvalue().to_pybytes())
    shutil.rmtree(parts_dir(out), ignore_errors=True)


def drop_temporary_files(out: Path) -> None:
    """Temporary files a killed run left beside `out` and in its parts folder (under the lock)."""
    for folder in (out.parent, parts_dir(out)):
        if folder.is_dir():
            for f in folder.glob(f".{out.name if folder == out.parent else 'part-'}*"):
                if is_temporary_name(f.name):
                    f.unlink(missing_ok=True)


def check_out(out: Path) -> None:
    """`--out` checked before any work: a folder, or an existing file that is not a scores file,
    is one error naming it (a folder was refused only after every image was scored; a Parquet
    file of other columns gave a traceback)."""
    if out.is_dir():
        raise UsageError(f"{out}: is a folder; --out is the scores file to write (e.g. {out / 'scores.parquet'})")
    if out.suffix != ".parquet":
        # the file is resumable and typed (Parquet); a table for a spreadsheet comes on stdout instead
        raise UsageError(f"{out}: the scores file must end in .parquet (e.g. {out.with_suffix('.parquet')}); for CSV "
                         f"or JSON add --format csv or --format json, and the rows also go to stdout")
    if not out.exists() and not out.is_symlink():
        return
    try:
        schema = pq.read_schema(out)
    except Exception:  # noqa: BLE001 - pyarrow raises several kinds for a file that is not Parquet
        raise UsageError(f"{out}: exists and is not a Parquet file; give a new --out (or move that file away)") from None
    try:
        _conform(schema.empty_table())
    except (KeyError, pa.ArrowException) as e:
        missing = sorted(set(SCORES_SCHEMA.names) - set(schema.names))
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        what = f"it lacks {', '.join(missing[:4])}{more}" if missing else str(e).splitlines()[0]
        raise UsageError(f"{out}: exists and is not a scores file of `banana100 score` ({what}); give a new "
                         "--out (or move that file away)") from None
