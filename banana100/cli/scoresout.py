"""What `banana100 score` shows on stdout once the scores file is written: a short table per metric
(how many images scored, mean, min, max, which direction is better), or with `--format csv|json`
this run's rows themselves, for a pipe (`banana100 score imgs --out s.parquet --format csv | ...`)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import TextIO

#: the columns --format csv|json writes: what identifies the image, then its score
ROW_COLUMNS = ("image", "chain_id", "step", "metric", "score", "lower_better", "error")


def scored_rows(out: Path, metrics: list[str]) -> list[dict]:
    """The rows of the scores file `out` for `metrics` (this run's), metric by metric in their order."""
    import pyarrow.parquet as pq

    rows = pq.read_table(out, columns=list(ROW_COLUMNS)).to_pylist()
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
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    table = "\n".join("  ".join(cell.ljust(w) if i in (0, len(head) - 1) else cell.rjust(w)
                                for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in lines)
    from banana100.metrics.native import edit_damage_rel

    if edit_damage_rel.BARE in metrics and edit_damage_rel.NAME not in metrics:  # the number read alone
        table += "\nnote: " + edit_damage_rel.alone_note()
    return table


def write_rows(rows: list[dict], fmt: str, stream: TextIO) -> None:
    """The rows as CSV (with a header line) or JSON (one array of objects); a NaN score is empty / null."""
    clean = [{c: (None if c == "score" and not _finite(r[c]) else r[c]) for c in ROW_COLUMNS} for r in rows]
    if fmt == "csv":
        writer = csv.DictWriter(stream, fieldnames=ROW_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(clean)
    elif fmt == "json":
        json.dump(clean, stream)
        stream.write("\n")
    else:
        raise ValueError(f"unknown format {fmt!r}")
