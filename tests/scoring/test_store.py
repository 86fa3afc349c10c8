"""The scores store's part files, in the fast tier (issue 44, tests that guard nothing): the order they are
read in (the newest row wins), and a merged file's record of the parts it holds (none read twice)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from banana100.scoring import store


def _row(**kw):
    row = {name: None for name in store.SCORES_SCHEMA.names}
    row.update(metric="piqe", lower_better=True, backend="native", mode="pyiqa", precision="exact", version=1, **kw)
    return row


def _part(parts, name, rows, mtime):
    parts.mkdir(exist_ok=True)
    path = parts / name
    pq.write_table(pa.Table.from_pylist(rows, schema=store.SCORES_SCHEMA), path)
    os.utime(path, ns=(mtime, mtime))
    return path


def test_parts_are_read_oldest_first_so_the_newest_row_wins(tmp_path):
    """An image scored, changed on disk, and scored again before any merge: two part files hold its rows. The
    newer one (by time, whatever the names say) must win the merge; read newest first, the old bytes' row won."""
    out = tmp_path / "s.parquet"
    parts = out.with_name(out.name + ".parts")
    image = str(tmp_path / "a.png")
    _part(parts, "part-000001-aaaaaaaaaaaa.parquet", [_row(image=image, sha256="old", score=1.0)], 1_000_000_000)
    _part(parts, "part-000000-bbbbbbbbbbbb.parquet", [_row(image=image, sha256="new", score=2.0)], 2_000_000_000)
    assert [p.name for p in store.part_files(out)] == ["part-000001-aaaaaaaaaaaa.parquet",
                                                          "part-000000-bbbbbbbbbbbb.parquet"]
    store.merge_parts(out, [])
    assert pq.read_table(out).select(["sha256", "score"]).to_pylist() == [{"sha256": "new", "score": 2.0}]


def test_parts_already_merged_are_not_read_again(tmp_path):
    """A kill between the merge's rename and the removal of the parts folder leaves merged parts behind: the
    merged file lists them, and they are skipped (read again, every chain step would be 'scored twice')."""
    out = tmp_path / "s.parquet"
    parts = out.with_name(out.name + ".parts")
    rows = [_row(chain_id="c", step=k, sha256=f"h{k}", score=float(k)) for k in range(3)]
    _part(parts, "part-000000-cccccccccccc.parquet", rows, 1_000_000_000)
    store.merge_parts(out, [])
    assert not parts.exists()
    left = _part(parts, "part-000000-cccccccccccc.parquet", rows, 1_000_000_000)  # as the kill left it
    assert store.pending_parts(out) == []
    assert store.read_scores(out).num_rows == 3
    newer = _part(parts, "part-000001-dddddddddddd.parquet", [_row(chain_id="c", step=3, sha256="h3", score=3.0)],
                  2_000_000_000)
    assert store.pending_parts(out) == [newer] and left.exists()
    store.merge_parts(out, [])
    assert sorted(pq.read_table(out)["step"].to_pylist()) == [0, 1, 2, 3]
