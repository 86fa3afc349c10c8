"""Releases of any shape: ten-step chains whose images change size, two chat modes and a variant
label per chain (the release's `more_models` supplement), from `import-chains` through the
dataset, the scores and the report."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from banana100.chains.importer import import_chains, plan_chains
from banana100.chains.manifest import read_manifest
from banana100.errors import ImportChainsError
from banana100.schema import chain_id
from banana100.testing.releasetools import SUPPLEMENT_PATTERN, SUPPLEMENT_SEQUENCES, make_supplement_standin


@pytest.fixture(scope="module")
def supplement(tmp_path_factory) -> dict:
    """The stand-in imported, built into a dataset and scored with PIQE (once for the module)."""
    from banana100 import scoring
    from banana100.dataset.build import build_dataset

    root = tmp_path_factory.mktemp("supplement")
    release = make_supplement_standin(root / "release")
    run = root / "run"
    summary = import_chains(release, SUPPLEMENT_PATTERN, run, model="various")
    dataset = root / "dataset"
    build_dataset([run], dataset)
    scores = root / "scores.parquet"
    scoring.score_to_parquet(dataset, ["piqe"], scores, device="cpu", progress=False)
    return {"root": root, "run": run, "summary": summary, "dataset": dataset, "scores": scores}


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_every_supplement_sequence_becomes_its_own_chain(supplement):
    records = read_manifest(supplement["run"])
    assert supplement["summary"].chains == len(SUPPLEMENT_SEQUENCES) == 11
    chains = {}
    for r in records:
        chains.setdefault(r["chain_id"], []).append(r)
    assert len(chains) == 11 and all(len(v) == 11 for v in chains.values())  # steps 0..10
    same = {c for c, rs in chains.items() if rs[0]["chat_mode"] == "same"}
    assert same == {chain_id("dunes", "replicate", 0, "same", v) for v, chat in SUPPLEMENT_SEQUENCES
                    if chat == "same_chat"}
    for cid, rs in chains.items():
        assert {r["chat_mode"] for r in rs} | {r["variant"] for r in rs} <= {"same", "different", *(
            v for v, _ in SUPPLEMENT_SEQUENCES)}
        assert len({(r["width"], r["height"]) for r in rs}) > 1, f"{cid}: sizes should change from step to step"
        assert (rs[0]["width"], rs[0]["height"]) == (136, 120)


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_chat_mode_and_variant_reach_the_dataset_and_its_card(supplement):
    import datasets

    from banana100.dataset.verify import verify_dataset

    report = verify_dataset(supplement["dataset"], decode=True)
    assert report.ok, report.problems
    ds = datasets.load_dataset(str(supplement["dataset"]), split="train")
    rows = ds.remove_columns("image").to_pandas()
    assert sorted(rows.groupby("chat_mode")["chain_id"].nunique().items()) == [("different", 7), ("same", 4)]
    assert rows["variant"].nunique() == 7
    assert ds[20]["image"].size == (ds[20]["width"], ds[20]["height"])
    card = (supplement["dataset"] / "README.md").read_text()
    assert "## Chat modes and variants" in card and "| `same` | `qwen_edit` | 1 | 11 |" in card
    assert "In 11 of the 11 chains the image size changes" in card


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_scores_carry_chat_mode_and_variant(supplement):
    scores = pq.read_table(supplement["scores"]).to_pandas()
    assert scores["error"].isna().all(), scores["error"].dropna().tolist()[:3]
    by_chain = scores.groupby("chain_id")[["chat_mode", "variant"]].first()
    assert (by_chain["chat_mode"] == "same").sum() == 4
    assert set(by_chain["variant"]) == {v for v, _ in SUPPLEMENT_SEQUENCES}


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_report_checks_the_steps_it_is_given_and_splits_by_chat_mode(supplement, tmp_path):
    from banana100.report import write_report

    out = write_report(supplement["scores"], tmp_path / "ten", reference_step=1, check_steps=(2, 5, 10))
    text = out.read_text()
    summary = json.loads((tmp_path / "ten" / "summary.json").read_text())
    assert summary["piqe"]["check_steps"] == [2, 5, 10] and summary["piqe"]["n_incomplete"] == 0
    assert "every check step (2, 5, 10) is strictly worse than at step 1" in text
    assert "### By chat mode and variant" in text
    assert "| piqe | same | qwen_edit | 1 |" in text and "| piqe | different | seedream | 1 |" in text  # cells as text (md_cell)
    assert "No chain reaches" not in text


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_report_on_ten_step_chains_says_which_steps_to_give(supplement, tmp_path):
    from banana100.report import write_report

    with pytest.warns(UserWarning, match=r"No chain reaches step 20 .* --check-steps 2,5,10 --reference-step 1"):
        out = write_report(supplement["scores"], tmp_path / "default")
    assert "No chain reaches step 20 (the longest ends at step 10)" in out.read_text()


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_leaderboard_by_chat_mode_counts_unrecorded_modes_as_different(supplement, tmp_path):
    import pandas as pd

    from banana100.leaderboard import leaderboard, merge_scores

    old = pq.read_table(supplement["scores"]).to_pandas()
    old = old[old["chat_mode"] == "different"].drop(columns=["chat_mode", "variant"])  # a file from before the columns
    old_path = tmp_path / "old.parquet"
    old.to_parquet(old_path)
    board = leaderboard(merge_scores([old_path, supplement["scores"]]), ["chat_mode", "variant"], check_steps=(2, 5, 10))
    assert set(board["chat_mode"]) == {"different", "same"}
    assert "-" in set(board["variant"]) and not pd.isna(board["variant"]).any()


def test_a_chat_mode_in_a_path_that_is_neither_is_named():
    paths = ["m/flux/same_chat/dunes/img_000.png", "m/flux/sometimes/dunes/img_000.png"]
    with pytest.raises(ImportChainsError, match=r"m/flux/sometimes/dunes/img_000.png: chat mode 'sometimes'"):
        plan_chains(paths, "m/{variant}/{chat}/{source}/img_{step:03d}.png")
    plan = plan_chains(paths[:1] + ["m/flux/Different-Chat/dunes/img_000.png"],
                       "m/{variant}/{chat}/{source}/img_{step:03d}.png")
    assert sorted(c.chat_mode for c in plan.chains.values()) == ["different", "same"]


def test_options_give_the_chat_mode_and_variant_of_a_folder_without_them(tmp_path):
    release = make_supplement_standin(tmp_path / "release")
    summary = import_chains(release / "more_models" / "qwen_edit" / "same_chat", "{source}/img_{step:03d}.png",
                            tmp_path / "run", chat_mode="same_chat", variant="qwen_edit")
    assert summary.chains == 1
    records = read_manifest(tmp_path / "run")
    assert {(r["chain_id"], r["chat_mode"], r["variant"]) for r in records} == {
        ("dunes__replicate__qwen_edit__same-chat__r0", "same", "qwen_edit")}
    with pytest.raises(ImportChainsError, match="--chat-mode: chat mode 'often'"):
        import_chains(release, SUPPLEMENT_PATTERN.replace("{chat}", "*"), tmp_path / "run2", chat_mode="often")


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_a_dataset_written_before_the_chat_mode_field_still_reads(supplement, tmp_path):
    import shutil

    import pyarrow as pa

    from banana100 import scoring
    from banana100.dataset.reader import iter_dataset_records

    old = tmp_path / "old"
    shutil.copytree(supplement["dataset"], old)
    for f in (old / "data").rglob("*.parquet"):
        table = pq.read_table(f)
        pq.write_table(table.drop_columns(["chat_mode", "variant"]), f)
    record, data = next(iter_dataset_records(old))
    assert record["chat_mode"] is None and record["variant"] is None and data
    scoring.score_to_parquet(old, ["piqe"], tmp_path / "s.parquet", device="cpu", progress=False, chunk_size=8)
    scores = pq.read_table(tmp_path / "s.parquet")
    assert scores.column("chat_mode").null_count == scores.num_rows
    assert scores.schema.field("chat_mode").type == pa.string()


@pytest.mark.integration  # the module fixture imports, builds and scores (~10 s)
def test_verify_names_a_chain_whose_rows_disagree_on_chat_mode(supplement, tmp_path):
    import shutil

    import pyarrow as pa

    from banana100.dataset.verify import verify_dataset

    bad = tmp_path / "bad"
    shutil.copytree(supplement["dataset"], bad)
    f = sorted((bad / "data").rglob("*.parquet"))[0]
    table = pq.read_table(f)
    modes = table.column("chat_mode").to_pylist()
    steps = table.column("step").to_pylist()
    i = next(i for i, (m, s) in enumerate(zip(modes, steps, strict=True)) if m == "different" and s == 3)
    modes[i] = "same"
    table = table.set_column(table.schema.get_field_index("chat_mode"), "chat_mode", pa.array(modes, pa.string()))
    pq.write_table(table, f)
    problems = [p for p in verify_dataset(bad).problems if p.kind == "chain"]
    assert problems and "disagree on setting/source_id/repeat/chat_mode/variant" in problems[0].message
