"""Issue 44 item 1: every row records what made its score (method, precision, the metric's version, and
for edit_damage_rel the reference's path and sha256), and a resume compares them row by row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import skimage.data
from PIL import Image

from banana100.chains.editors.simulated import SimulatedEditor
from banana100.metrics.table import get_metric
from banana100.errors import Banana100Error


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    """Two unrelated references and three edits of the first."""
    root = tmp_path_factory.mktemp("prov")
    a = np.ascontiguousarray(skimage.data.coffee()[::4, ::4])  # 100x150
    editor, images = SimulatedEditor(), [a]
    for k in range(1, 4):
        images.append(editor.apply(images[-1], k))
    (root / "imgs").mkdir()
    for k in (1, 2, 3):
        Image.fromarray(images[k]).save(root / "imgs" / f"{k}.png")
    Image.fromarray(a).save(root / "refA.png")
    Image.fromarray(np.ascontiguousarray(skimage.data.astronaut()[::5, ::5])).save(root / "refB.png")
    return root


def _score(root, out, reference):
    from banana100.scoring import score_to_parquet

    score_to_parquet(root / "imgs", ["edit_damage"], out, device="cpu", progress=False, decode_workers=0,
                     reference=reference)
    df = pd.read_parquet(out)
    return df[df.metric == "edit_damage_rel"].sort_values("image").reset_index(drop=True)


def test_each_row_says_what_made_it(pictures, tmp_path):
    from banana100.fileio import sha256_bytes

    rel = _score(pictures, tmp_path / "s.parquet", pictures / "refA.png")
    assert len(rel) == 3 and rel.error.isna().all()
    assert (rel.reference == str(pictures / "refA.png")).all()
    assert (rel.reference_sha256 == sha256_bytes((pictures / "refA.png").read_bytes())).all()
    v = get_metric("edit_damage").version
    assert (rel.version == v).all() and (rel.backend == "native").all() and (rel.precision == "exact").all()
    bare = pd.read_parquet(tmp_path / "s.parquet").query("metric == 'edit_damage'")
    assert (bare.version == v).all() and bare.reference.isna().all()


def test_another_reference_is_scored_again_not_resumed(pictures, tmp_path, caplog):
    """The issue's reproduction: refA's scores came back for refB (rc 0, no warning)."""
    out = tmp_path / "rel.parquet"
    a = _score(pictures, out, pictures / "refA.png")
    truth = _score(pictures, tmp_path / "fresh_b.parquet", pictures / "refB.png")
    assert not np.allclose(a.score, truth.score)
    with caplog.at_level("INFO", "banana100"):
        b = _score(pictures, out, pictures / "refB.png")
    np.testing.assert_allclose(b.score, truth.score, rtol=1e-9)
    assert len(pd.read_parquet(out)) == 6  # refA's rows replaced, not doubled
    assert "3 edit_damage_rel row(s) were scored against another reference (refA.png)" in caplog.text
    # the same path with other bytes: scored again too
    ref = tmp_path / "ref.png"
    ref.write_bytes((pictures / "refA.png").read_bytes())
    np.testing.assert_allclose(_score(pictures, out, ref).score, a.score, rtol=1e-9)
    ref.write_bytes((pictures / "refB.png").read_bytes())
    np.testing.assert_allclose(_score(pictures, out, ref).score, truth.score, rtol=1e-9)


def test_error_rows_of_a_mistyped_reference_go_once_it_is_fixed(pictures, tmp_path, monkeypatch):
    """A mistyped --reference is a usage error now (test_score_output); the error rows an earlier version wrote
    for one (no reference recorded, or one that could not be read: no sha256) are scored again. (A file from
    before the version column is read as this version's here: its edit_damage rows would be refused as an
    earlier version's otherwise, test_a_file_from_before_the_columns.)"""
    from banana100.metrics.table import version_before_the_column as real
    from banana100.scoring import provenance

    now = get_metric("edit_damage").version
    monkeypatch.setattr(provenance, "version_before_the_column",
                        lambda m, c, s: now if real(m, c, s) == 3 else real(m, c, s))
    out = tmp_path / "rel.parquet"
    good = _score(pictures, out, pictures / "refA.png")
    t = pq.read_table(out)
    rel = pa.compute.equal(t["metric"], "edit_damage_rel").to_pylist()
    df = t.to_pandas()
    df.loc[rel, "score"] = np.nan
    df.loc[rel, "error"] = "x.png: its reference could not be used: refAA.png: no such file"
    df.loc[rel, "components"] = None
    for written in (df.assign(reference=[str(pictures / "refAA.png") if r else None for r in rel],
                              reference_sha256=None),
                    df.drop(columns=["version", "reference", "reference_sha256"])):
        pq.write_table(pa.Table.from_pandas(written, preserve_index=False), out)
        fixed = _score(pictures, out, pictures / "refA.png")
        assert fixed.error.isna().all() and len(pd.read_parquet(out)) == 6
        np.testing.assert_allclose(fixed.score, good.score, rtol=1e-9)


def test_a_kill_between_two_references_keeps_the_newest(pictures, tmp_path):
    """A -> B (killed before the merge) -> A: the rows of the rerun win, never B's left in the parts."""
    from banana100.scoring.store import read_scores

    out = tmp_path / "rel.parquet"
    a = _score(pictures, out, pictures / "refA.png")
    _score(pictures, tmp_path / "b.parquet", pictures / "refB.png")
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    pq.write_table(pq.read_table(tmp_path / "b.parquet"), parts / "part-000000-deadbeef0000.parquet")
    assert len(read_scores(out)) == 12  # both, without the doubled-row refusal
    again = _score(pictures, out, pictures / "refA.png")
    np.testing.assert_allclose(again.score, a.score, rtol=1e-9)
    assert len(pd.read_parquet(out)) == 6


def test_rows_of_another_version_are_refused_by_the_column_not_by_their_shape(pictures, tmp_path):
    out = tmp_path / "s.parquet"
    _score(pictures, out, None)
    t = pq.read_table(out)
    i = t.schema.get_field_index("version")
    pq.write_table(t.set_column(i, "version", pa.array([1] * len(t), pa.int32())), out)  # evenness kept
    with pytest.raises(Banana100Error, match=rf"3 edit_damage score\(s\) made another way: .*version 1 there; .*version {get_metric('edit_damage').version} now \(an earlier version"):
        _score(pictures, out, None)
    assert pq.read_table(out).num_rows == 3  # nothing added, nothing lost


def test_a_file_from_before_the_columns(pictures, tmp_path, caplog):
    """A file from before the version column was written by version 3 at the latest: its edit_damage rows keep
    the version their components say (the signatures' 3) and, the table being at a later one now, are refused,
    nothing lost; as the current version (what a file of version 3 would do under version 3) they resume, and
    edit_damage_rel rows, of an unknown reference, are scored again once."""
    from banana100.metrics.table import version_before_the_column as real
    from banana100.scoring import provenance

    out = tmp_path / "s.parquet"
    first = _score(pictures, out, pictures / "refA.png")
    pq.write_table(pq.read_table(out).drop(["version", "reference", "reference_sha256"]), out)
    now = get_metric("edit_damage").version
    assert now > 3
    with pytest.raises(Banana100Error, match=rf"3 edit_damage score\(s\) made another way: .*version 3 there; .*version {now} now"):
        _score(pictures, out, pictures / "refA.png")
    assert pq.read_table(out).num_rows == 6  # nothing added, nothing lost
    with caplog.at_level("INFO", "banana100"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(provenance, "version_before_the_column", lambda m, c, s: now if real(m, c, s) == 3 else real(m, c, s))
        again = _score(pictures, out, pictures / "refA.png")
    assert "3 edit_damage_rel row(s) were scored against another reference (not recorded)" in caplog.text
    np.testing.assert_allclose(again.score, first.score, rtol=1e-9)
    assert again.reference_sha256.notna().all() and len(pd.read_parquet(out)) == 6
