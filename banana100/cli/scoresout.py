"""What `banana100 score` shows on stdout once the scores file is written: a short table per metric
(how many images scored, mean, min, max, which direction is better), or with `--format csv|json`
this run's rows themselves, for a pipe (`banana100 score imgs --out s.parquet --format csv | ...`)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import TextIO

from banana100.texttable import columns

#: the columns --format csv|json writes: what identifies the image, then its score
ROW_COLUMNS = ("image", "chain_id", "step", "metric", "score", "lower_better", "error")


#: at most this many images get a line each in the table of what edit_damage's scores are made of
MAX_BREAKDOWN = 10


def scored_rows(out: Path, metrics: list[str], ids: tuple[str, set] | None = None) -> list[dict]:
    """The rows of the scores file `out` for `metrics` (this run's), metric by metric in their order
    (with `components`, the detector's: for the breakdown, and in --format json); with `ids`
    (`banana100.scoring.inputs.source_ids`), of this run's images only (the file may hold others)."""
    import pyarrow.parquet as pq

    from banana100.scoring.store import of_this_run

    rows = pq.read_table(out, columns=[*ROW_COLUMNS, "components"]).to_pylist()
    if ids is not None:
        rows = [r for r, mine in zip(rows, of_this_run(rows, ids), strict=True) if mine]
    order = {m: i for i, m in enumerate(metrics)}
    return sorted((r for r in rows if r["metric"] in order), key=lambda r: order[r["metric"]])  # stable


def _finite(score) -> bool:
    return score is not None and math.isfinite(score)


def summary_table(rows: list[dict], metrics: list[str]) -> str:
    """One line per metric: n (finite scores), failed (rows without one), mean, min, max, better."""
    head = ("metric", "n", "failed", "mean", "min", "max", "better")
    lines = [head]
    for m in metrics:
        mine = [r for r in rows if r["metric"] == m]
        scores = [r["score"] for r in mine if _finite(r["score"])]
        stats = [f"{v:.4f}" for v in (sum(scores) / len(scores), min(scores), max(scores))] if scores else ["-"] * 3
        better = ("lower" if mine[0]["lower_better"] else "higher") if mine else "?"
        lines.append((m, str(len(scores)), str(len(mine) - len(scores)), *stats, better))
    table = "\n".join(columns(lines, right=range(1, len(head) - 1)))
    from banana100.metrics.detector import evidence
    from banana100.metrics.detector import relative as edit_damage_rel

    for m in (edit_damage_rel.BARE, edit_damage_rel.NAME):
        if m in metrics:
            table += breakdown([r for r in rows if r["metric"] == m], m)
    if edit_damage_rel.BARE in metrics and edit_damage_rel.NAME not in metrics:  # the number read alone
        table += ("\n\n" if "\n\n" in table else "\n") + "note: " + evidence.alone_note()
    return table


def breakdown(rows: list[dict], metric: str) -> str:
    """What each image's edit_damage (or edit_damage_rel) score is made of: its terms, which sum to the
    score, one line per image for up to MAX_BREAKDOWN images; else where to find them. "" without any."""
    from banana100.metrics.detector import model as ed
    from banana100.metrics.detector import relative as rel

    scored = [r for r in rows if _finite(r["score"])]
    rows = [r for r in scored if r.get("components")]
    # rows written before the scores file had the column (a resumed run) have none
    older = (f"\n{metric}: {len(scored) - len(rows)} of the scores were written before the scores file kept "
             "their components; score them into a new --out to see theirs") if len(rows) < len(scored) else ""
    if not rows:
        return older and "\n" + older
    if len(rows) > MAX_BREAKDOWN:
        return (f"\n\n{metric}: what each of the {len(rows)} scores is made of is in the scores file's `components` "
                "column (docs/edit-damage.md)" + older)
    if metric == rel.NAME:  # what each component added since the reference, over its unit
        terms = [rel.relative_terms(r["components"]) for r in rows]
        what, tail = "the terms of the damage added since the reference", ""
    else:
        terms = [ed.terms(r["components"]) for r in rows]
        what = "its terms"
        # what the terms cannot tell on one image (docs/edit-damage.md, "How far to trust it")
        tail = ("\nalone, a photograph's own film grain or sensor noise reads as grain, its light as colour_cast, "
                "shallow focus as softness, sharp highlights and fine lines as crease or speckles; a smooth render "
                "reads simplification, any JPEG some blocking")
    names = tuple(terms[0])  # the bare score's ed.TERMS; the relative score's rel.REL_TERMS (its own too)
    head = ("image", "score", *names)
    lines = [head] + [(_label(r), f"{r['score']:.2f}", *(f"{t[n]:.2f}" for n in names)) for r, t in zip(rows, terms, strict=True)]
    body = "\n".join(columns(lines, right=range(1, len(head))))
    return (f"\n\n{metric}, each score and {what} (they add up to it; the components are in the scores file):"
            f"\n{body}{tail}{older}")


def _label(row: dict) -> str:
    """A chain image as `chain step N`, a plain one by its file name."""
    if row.get("chain_id") is not None:
        return f"{row['chain_id']} step {row['step']}"
    return Path(row["image"]).name


def write_rows(rows: list[dict], fmt: str, stream: TextIO) -> None:
    """The rows as CSV (with a header line) or JSON (one array of objects); a NaN score is empty / null.
    JSON objects also carry `components` (the edit_damage detector's, else null); CSV keeps its columns."""
    clean = [{c: (None if c == "score" and not _finite(r[c]) else r[c]) for c in ROW_COLUMNS} for r in rows]
    if fmt == "csv":
        writer = csv.DictWriter(stream, fieldnames=ROW_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(clean)
    elif fmt == "json":
        json.dump([{**c, "components": r.get("components")} for c, r in zip(clean, rows, strict=True)], stream)
        stream.write("\n")
    else:
        raise ValueError(f"unknown format {fmt!r}")
