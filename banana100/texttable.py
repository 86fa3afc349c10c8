"""Plain-text tables for the terminal: the one column aligner of `score`'s table and note and `weights check`."""

from __future__ import annotations

from collections.abc import Sequence


def columns(rows: Sequence[Sequence[str]], right: Sequence[int] = (), indent: str = "") -> list[str]:
    """Rows of cells as lines, columns two spaces apart: flush left, the columns `right` (numbers) flush right; no
    trailing blanks, so the last column may stay ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows]
