"""What made each score, row by row: the method (backend, mode), the precision, the metric's version
(the metric table's `version`) and, for a metric scored against a reference (edit_damage_rel), the
reference's path and sha256. `banana100 score` writes them with every row; a resume compares them per
row; `banana100 report` refuses a metric whose rows disagree.

A resume into a file whose rows were made another way:
- another backend, mode, precision or version of the metric: refused, on one line naming the file and
  the counts (the rows would not compare; the user chose one of the two by mistake, most likely);
- another reference (other bytes, or a reference that could not be read): those rows are scored again
  against this run's reference, and the merge keeps the newest row of each image (`drop_superseded`).
  edit_damage_rel is cheap, and the user who names another reference means to score against it.

Files written before these columns: every metric's rows are version 1 (no metric changed before the
column but edit_damage), except edit_damage's, whose version shows in its components (the evenness
component came with version 2: without it, version 1; error rows: unknown, never compared), and
edit_damage_rel's, whose reference is unknown too: unknown, and scored again once.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

import pyarrow as pa

from banana100.errors import Banana100Error
from banana100.fileio import sha256_bytes
from banana100.metrics.table import METRICS, SCORE_METHOD, version_before_the_column

log = logging.getLogger("banana100.scoring")

#: the columns this module fills (beside backend, mode and precision, which the feed writes)
COLUMNS = (("version", pa.int32()), ("reference", pa.string()), ("reference_sha256", pa.string()))
#: the metrics scored against a reference: the table's companions (edit_damage_rel)
REFERENCE_METRICS = frozenset(s.companion for s in METRICS.values() if s.companion)
#: the fields a resume and a report compare per metric (all of one value within a metric)
METHOD = SCORE_METHOD

Reference = tuple[str | None, str | None]  # (path, sha256); (None, None): none found


def legacy_versions(metrics: list, components: list, scores: list) -> list[int | None]:
    """The `version` of rows written before the column (`table.version_before_the_column`)."""
    return [version_before_the_column(m, c, s) for m, c, s in zip(metrics, components, scores, strict=True)]


def with_versions(table: pa.Table) -> pa.Table:
    """`table` with a `version` column, inferred for a file from before it (`legacy_versions`)."""
    if "version" in table.column_names:
        return table
    comps = table["components"].to_pylist() if "components" in table.column_names else [None] * len(table)
    versions = legacy_versions(table["metric"].to_pylist(), comps, table["score"].to_pylist())
    return table.append_column("version", pa.array(versions, pa.int32()))


def check_reference(reference, metrics: list[str]) -> None:
    """`--reference` checked before any work: a usage error naming it when it is missing, a folder, not an
    image, too small for the metric, or given without a metric that uses it (it was ignored silently, and a
    missing file gave one error row per image with rc 0)."""
    from banana100.errors import Banana100Error as Failed, UsageError
    from banana100.imageio import load_rgb
    from banana100.metrics.table import get_metric

    bare = [s.name for s in METRICS.values() if s.companion]
    if not set(bare) & set(metrics):
        raise UsageError(f"--reference {reference}: only {', '.join(bare)} use{'s' if len(bare) == 1 else ''} a "
                         f"reference (scored beside it as {', '.join(REFERENCE_METRICS)}), and the metrics of this "
                         f"run ({', '.join(metrics)}) do not include it: add it to --metrics, or leave --reference out")
    path = Path(reference)
    if not path.exists():
        raise UsageError(f"--reference {reference}: no such file")
    if path.is_dir():
        raise UsageError(f"--reference {reference}: is a folder; give the one image the others were edited from")
    try:
        rgb = load_rgb(path)
    except Failed as e:
        raise UsageError(f"--reference {e}") from None
    for spec in (get_metric(name) for name in bare if name in metrics):
        if min(rgb.shape[:2]) < spec.min_size:
            raise UsageError(f"--reference {reference}: is {rgb.shape[1]}x{rgb.shape[0]} (width x height); "
                             f"{spec.display_name} needs at least {spec.min_size}x{spec.min_size} pixels")


def plain_reference(reference) -> Reference:
    """A plain image's --reference as recorded: its canonical path and the sha256 of its bytes."""
    from banana100.fileio import read_regular_bytes
    from banana100.scoring.inputs import canonical_image_path

    return canonical_image_path(reference), sha256_bytes(read_regular_bytes(Path(reference)))


def chain_references(source) -> Callable[[dict], Reference]:
    """record -> step 0 of its chain (its path as the manifest or dataset names it, and its sha256),
    read once, on first use: a chain's reference."""
    index: dict[str, Reference] | None = None

    def build() -> dict[str, Reference]:
        from banana100.chains.manifest import MANIFEST_NAME, read_manifest

        root = Path(source)
        if (root / MANIFEST_NAME).is_file():
            return {r["chain_id"]: (r["image"], r.get("sha256")) for r in read_manifest(root) if r["step"] == 0}
        from banana100.dataset.reader import dataset_files, iter_file_batches

        found = {}
        for path in dataset_files(root):
            for _, records, _ in iter_file_batches(path, ("chain_id", "step", "sha256"), with_images=False):
                found.update({r["chain_id"]: (f"{r['chain_id']}/step 0", r["sha256"])
                              for r in records if r["step"] == 0})
        return found

    def find(record: dict) -> Reference:
        nonlocal index
        if index is None:
            index = build()
        return index.get(record.get("chain_id"), (None, None))

    return find


class Made:
    """How this run makes each metric's rows: its method, precision and version, and each row's reference."""

    def __init__(self, scorers: dict, source, reference=None):
        self.method = {m: (s.backend, s.mode, getattr(s, "precision", "exact"), s.spec.version)
                       for m, s in scorers.items()}
        self.references = REFERENCE_METRICS & set(scorers)
        if not self.references:
            self.reference_of: Callable[[dict], Reference] = lambda record: (None, None)
        elif reference is not None:
            fixed = plain_reference(reference)
            self.reference_of = lambda record: fixed
        else:
            self.reference_of = chain_references(source)

    def stamp(self, rows: list[dict]) -> list[dict]:
        """`rows` (of `_score_chunk`) with their version and reference."""
        for r in rows:
            r["version"] = self.method[r["metric"]][3]
            ref = self.reference_of(r) if r["metric"] in self.references else (None, None)
            r["reference"], r["reference_sha256"] = ref
        return rows

    def check(self, table: pa.Table, out: Path) -> None:
        """Refuse, on one line, to resume into `out` when rows of a metric of this run were made by
        another method, precision or version (files from before a column: see the module docstring)."""
        cols = table.select(["metric", *METHOD]).to_pydict()
        other: dict[tuple, int] = {}
        for metric, *method in zip(*(cols[c] for c in ["metric", *METHOD]), strict=True):
            now = self.method.get(metric)
            if now is None:
                continue
            if method[3] is None:  # an error row of unknown version: nothing was scored
                method[3] = now[3]
            if tuple(method) != now:
                other[(metric, *method)] = other.get((metric, *method), 0) + 1
        if not other:
            return
        (metric, *was), n = next(iter(sorted(other.items(), key=lambda kv: (kv[0][0], -kv[1]))))
        now = self.method[metric]

        def way(m) -> str:
            return f"backend={m[0]!r}, mode={m[1]!r}, precision={m[2]!r}, version {m[3]}"

        earlier = " (an earlier version of the metric: they would not compare with new ones)" if was[3] != now[3] else ""
        raise Banana100Error(
            f"{out} already holds {n} {metric} score(s) made another way: {way(was)} there; {way(now)} now{earlier}. "
            "Score into another --out (or remove that file), or resume with the same backend, mode and precision")

    def done_keys(self, table: pa.Table, key: Callable[[dict, str], tuple]) -> set[tuple]:
        """The keys already scored as this run would: the newest row of each key (`table` oldest first),
        and for a reference metric only where that row's reference is this run's (same sha256); the
        others are scored again, and the count is said on one line."""
        newest: dict[tuple, dict] = {}
        for r in table.select(["chain_id", "step", "image", "sha256", "metric", "reference",
                               "reference_sha256"]).to_pylist():
            newest[key(r, r["metric"])] = r
        done, again = set(), {}
        for k, r in newest.items():
            if r["metric"] in self.references and self.method.get(r["metric"]) is not None:
                ref = self.reference_of(r)
                if r["reference_sha256"] is None or r["reference_sha256"] != ref[1]:
                    again.setdefault(r["metric"], []).append(r)
                    continue
            done.add(k)
        for metric, rows in again.items():
            was = sorted({os.path.basename(r["reference"]) if r["reference"] else "not recorded" for r in rows})
            log.info("%d %s row(s) were scored against another reference (%s): scored again against this run's",
                     len(rows), metric, ", ".join(was[:3]) + (", ..." if len(was) > 3 else ""))
        return done


def drop_superseded(table: pa.Table, key: Callable[[dict, str], tuple]) -> pa.Table:
    """`table` (oldest rows first) with only the newest row of each key of a reference metric: the
    rows scored again against another reference (`Made.done_keys`) replace the older ones."""
    cols = table.select(["chain_id", "step", "image", "sha256", "metric"]).to_pylist()
    last = {}
    for i, r in enumerate(cols):
        if r["metric"] in REFERENCE_METRICS:
            last[key(r, r["metric"])] = i
    drop = [i for i, r in enumerate(cols) if r["metric"] in REFERENCE_METRICS and last[key(r, r["metric"])] != i]
    if not drop:
        return table
    gone = set(drop)
    return table.take(pa.array([i for i in range(len(cols)) if i not in gone], pa.int64()))


def differ(a: dict, b: dict) -> bool:
    """Two rows of one key that may both be in a scores file: a reference metric scored against two references."""
    return a["metric"] in REFERENCE_METRICS and a.get("reference_sha256") != b.get("reference_sha256")
