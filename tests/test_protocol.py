"""The sensitivity protocol on hand-computed cases (docs/protocol.md)."""

import math

import pytest

from banana100.protocol import sensitivity

STEPS = [0, 1, 5, 10, 20]


def chain(cid, values, steps=STEPS):
    return [(cid, s, v) for s, v in zip(steps, values, strict=True)]


def run(rows, **kw):
    cids, steps, scores = zip(*rows, strict=True)
    kw.setdefault("lower_better", False)  # the direction is required (see test_direction_is_never_guessed)
    return sensitivity(list(scores), list(steps), list(cids), **kw)


def test_pass_when_every_check_step_is_worse():
    out = run(chain("a", [9.0, 8.0, 7.0, 6.0, 5.0]))
    c = out["per_chain"][0]
    assert c["passed"] is True
    assert (c["d_5"], c["d_10"], c["d_20"]) == (-1.0, -2.0, -3.0)
    assert out["n_failed"] == 0 and out["failure_rate"] == 0.0
    assert c["rho"] == pytest.approx(-1.0)


def test_fail_when_one_check_step_is_better():
    out = run(chain("a", [9.0, 8.0, 7.0, 8.5, 5.0]))
    c = out["per_chain"][0]
    assert c["passed"] is False
    assert c["d_10"] == pytest.approx(0.5)
    assert out["failure_rate"] == 1.0


def test_tie_is_a_failure():
    out = run(chain("a", [9.0, 8.0, 7.0, 6.0, 8.0]))
    assert out["per_chain"][0]["d_20"] == 0.0
    assert out["per_chain"][0]["passed"] is False


def test_lower_better_orientation():
    # NIQE-like: raw scores rise as the image gets worse, so the chain passes ...
    rising = chain("a", [3.0, 4.0, 5.0, 6.0, 7.0])
    out = run(rising, lower_better=True)
    c = out["per_chain"][0]
    assert c["passed"] is True
    assert c["d_5"] == pytest.approx(-1.0)  # oriented: -5 - (-4)
    # ... and the same numbers read as higher-is-better fail.
    assert run(rising, lower_better=False)["per_chain"][0]["passed"] is False


def test_incomplete_chain_is_counted_apart():
    rows = chain("full_fail", [9.0, 8.0, 9.0, 9.0, 9.0]) + chain("full_pass", [9.0, 8.0, 7.0, 6.0, 5.0])
    rows += chain("no_step_20", [9.0, 8.0, 7.0, 6.0], steps=[0, 1, 5, 10])
    rows += chain("nan_at_ref", [9.0, float("nan"), 7.0, 6.0, 5.0])
    out = run(rows)
    assert out["n_chains"] == 4
    assert out["n_incomplete"] == 2
    assert sorted(out["incomplete_chains"]) == ["nan_at_ref", "no_step_20"]
    assert out["n_failed"] == 1 and out["n_passed"] == 1
    assert out["failure_rate"] == pytest.approx(1 / 2)  # 1 failed of 2 complete, not of 4
    by_id = {c["chain_id"]: c for c in out["per_chain"]}
    assert by_id["no_step_20"]["passed"] is None
    assert by_id["no_step_20"]["missing_steps"] == [20]
    assert by_id["no_step_20"]["d_20"] is None and by_id["no_step_20"]["d_5"] == pytest.approx(-1.0)
    assert by_id["nan_at_ref"]["missing_steps"] == [1]


def test_no_complete_chain_gives_no_rate():
    out = run(chain("a", [1.0, 2.0], steps=[0, 1]))
    assert out["failure_rate"] is None and out["n_incomplete"] == 1


def test_custom_reference_and_check_steps():
    out = run(chain("a", [5.0, 9.0, 8.0, 9.5, 9.9]), reference_step=0, check_steps=(1, 5))
    c = out["per_chain"][0]
    assert set(k for k in c if k.startswith("d_")) == {"d_1", "d_5"}
    assert c["passed"] is False  # every step is *better* than the source


def test_summary_rho_and_last_step():
    rows = chain("a", [9.0, 8.0, 7.0, 6.0, 5.0]) + chain("b", [9.0, 8.0, 9.0, 10.0, 11.0])
    out = run(rows)
    # chain b: ranks of [9, 8, 9, 10, 11] are [2.5, 1, 2.5, 4, 5]; rho = 8 / sqrt(10 * 9.5)
    assert out["per_chain"][1]["rho"] == pytest.approx(8 / math.sqrt(95))
    assert out["mean_rho"] == pytest.approx((-1.0 + 8 / math.sqrt(95)) / 2)
    assert out["share_last_worse"] == pytest.approx(0.5)


def test_order_of_rows_does_not_matter():
    rows = chain("a", [9.0, 8.0, 7.0, 6.0, 5.0]) + chain("b", [9.0, 8.0, 9.0, 10.0, 11.0])
    assert run(rows) == run(rows[::-1])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same length"):
        sensitivity([1.0], [1, 2], ["a", "a"], lower_better=False)
    with pytest.raises(ValueError, match="more than one score for step 1"):
        sensitivity([1.0, 2.0], [1, 1], ["a", "a"], lower_better=False)
    with pytest.raises(ValueError, match="reference step"):
        sensitivity([1.0], [1], ["a"], check_steps=(1, 5), lower_better=False)


# PIQE-like scores (lower is better) that rise with the damage at every check step of chain a,
# and at steps 5 and 10 but not 20 of chain b: read the right way, a passes and b fails (50 %);
# read as higher-is-better, both fail (100 %) with no warning: the silently wrong answer.
PIQE_ROWS = chain("a", [20.0, 30.0, 40.0, 50.0, 60.0]) + chain("b", [20.0, 30.0, 35.0, 40.0, 25.0])


def test_direction_is_never_guessed():
    """Without lower_better or a known metric= the protocol refuses, in the library and the module."""
    import evaluate

    from banana100.errors import UsageError
    from fixtures.repopaths import REPO

    cids, steps, scores = map(list, zip(*PIQE_ROWS, strict=True))
    with pytest.raises(UsageError, match="lower_better must be True or False"):
        sensitivity(scores, steps, cids)
    with pytest.raises(UsageError, match="lower_better must be True or False"):
        sensitivity(scores, steps, cids, lower_better="yes")
    module = evaluate.load(str(REPO / "metrics" / "banana100_sensitivity"))
    with pytest.raises(UsageError, match="lower_better"):
        module.compute(scores=scores, steps=steps, chain_ids=cids)
    with pytest.raises(UsageError, match="not in the metric table"):
        module.compute(scores=scores, steps=steps, chain_ids=cids, metric="my_own_metric")


def test_direction_from_the_metric_table():
    """The protocol knows no metric; the table's direction of a named one is score_direction, which
    the evaluate module applies to its metric=."""
    import evaluate

    from banana100.metrics.table import score_direction
    from fixtures.repopaths import REPO

    cids, steps, scores = map(list, zip(*PIQE_ROWS, strict=True))
    module = evaluate.load(str(REPO / "metrics" / "banana100_sensitivity"))
    by_name = module.compute(scores=scores, steps=steps, chain_ids=cids, metric="piqe")
    assert by_name["lower_better"] is True and by_name["failure_rate"] == 0.5
    assert by_name == sensitivity(scores, steps, cids, lower_better=True)
    assert sensitivity(scores, steps, cids, lower_better=False)["failure_rate"] == 1.0  # the wrong reading
    assert score_direction(True, "PIQE") is True and score_direction(None, "clipiqa") is False
    with pytest.raises(ValueError, match="contradicts the metric table: piqe is lower-is-better"):
        score_direction(False, "piqe")
    with pytest.raises(ValueError, match="contradicts the metric table: piqe is lower-is-better"):
        module.compute(scores=scores, steps=steps, chain_ids=cids, metric="piqe", lower_better=False)


def test_evaluate_module_gives_the_hand_computed_verdicts():
    """The evaluate module against numbers worked out by hand (it was compared with the function it wraps,
    which a bug in both would pass)."""
    import evaluate

    from fixtures.repopaths import REPO

    module = evaluate.load(str(REPO / "metrics" / "banana100_sensitivity"))
    assert type(module).__name__ == "Banana100Sensitivity"
    rows = chain("a", [9.0, 8.0, 7.0, 6.0, 5.0]) + chain("b", [3.0, 4.0, 5.0, 6.0, 7.0])
    cids, steps, scores = map(list, zip(*rows, strict=True))
    out = module.compute(scores=scores, steps=steps, chain_ids=cids, lower_better=True)
    # lower is better: oriented a = -9, -8, -7, -6, -5 (better at every step: fails, rho +1, last step better);
    # oriented b = -3, -4, -5, -6, -7 (worse at every step: passes, d_k = -1, -2, -3, rho -1, last step worse)
    a, b = out["per_chain"]
    assert (a["chain_id"], a["passed"], a["d_5"], a["d_10"], a["d_20"]) == ("a", False, 1.0, 2.0, 3.0)
    assert (b["chain_id"], b["passed"], b["d_5"], b["d_10"], b["d_20"]) == ("b", True, -1.0, -2.0, -3.0)
    assert a["rho"] == pytest.approx(1.0) and b["rho"] == pytest.approx(-1.0)
    assert (a["last_step"], a["last_worse"], b["last_worse"]) == (20, False, True)
    assert (out["n_chains"], out["n_passed"], out["n_failed"], out["n_incomplete"]) == (2, 1, 1, 0)
    assert out["failure_rate"] == 0.5 and out["mean_rho"] == pytest.approx(0.0) and out["share_last_worse"] == 0.5
    assert out["check_steps"] == [5, 10, 20] and out["reference_step"] == 1 and out["lower_better"] is True


def test_a_last_step_tied_with_the_reference_is_not_worse():
    """last_worse is strict, as the verdict is: a tie at the last step is not a worse last step."""
    out = run(chain("tie", [9.0, 8.0, 7.0, 6.0, 8.0]) + chain("worse", [9.0, 8.0, 7.0, 6.0, 7.9]))
    tie, worse = out["per_chain"]
    assert (tie["last_worse"], worse["last_worse"]) == (False, True)
    assert out["share_last_worse"] == 0.5


def test_missing_scores_are_named_never_used_as_numbers():
    """NaN, inf and None scores (a metric had no score for that image) are listed by name."""
    rows = chain("nan_at_ref", [9.0, float("nan"), 7.0, 6.0, 5.0])
    rows += chain("none_at_10", [9.0, 8.0, 7.0, None, 5.0])
    rows += chain("inf_at_20", [9.0, 8.0, 7.0, 6.0, float("inf")])
    rows += chain("nan_at_0_only", [float("nan"), 8.0, 7.0, 6.0, 5.0])  # not a needed step: complete
    rows += chain("absent_and_nan", [9.0, 8.0, float("nan")], steps=[0, 1, 5])
    out = run(rows)  # higher is better: a falling score saw the damage
    by_id = {c["chain_id"]: c for c in out["per_chain"]}
    assert out["n_undefined_scores"] == 5
    assert out["undefined_scores"] == [{"chain_id": "absent_and_nan", "step": 5}, {"chain_id": "inf_at_20", "step": 20},
                                       {"chain_id": "nan_at_0_only", "step": 0}, {"chain_id": "nan_at_ref", "step": 1},
                                       {"chain_id": "none_at_10", "step": 10}]
    assert sorted(out["incomplete_chains"]) == ["absent_and_nan", "inf_at_20", "nan_at_ref", "none_at_10"]
    assert by_id["nan_at_ref"]["incomplete_reason"] == "no score at step 1"
    assert by_id["none_at_10"]["undefined_steps"] == [10] and by_id["none_at_10"]["missing_steps"] == [10]
    assert by_id["inf_at_20"]["passed"] is None and by_id["inf_at_20"]["d_20"] is None
    assert by_id["absent_and_nan"]["incomplete_reason"] == "steps 10, 20 absent; no score at step 5"
    c = by_id["nan_at_0_only"]  # complete: step 0 is not needed, it only drops out of rho
    assert c["passed"] is True and c["undefined_steps"] == [0] and c["incomplete_reason"] is None
    assert c["rho"] == pytest.approx(-1.0)
    assert out["failure_rate"] == 0.0 and out["n_passed"] == 1


def test_check_steps_for_short_chains_keep_the_papers_shape():
    from banana100.protocol import DEFAULT_CHECK_STEPS, check_steps_for

    assert check_steps_for(100) == check_steps_for(20) == DEFAULT_CHECK_STEPS == (5, 10, 20)
    assert check_steps_for(10) == (2, 5, 10)  # the supplement's ten-step chains
    assert check_steps_for(5) == (2, 5) and check_steps_for(2) == (2,)
    assert check_steps_for(1) == () and check_steps_for(3, reference_step=3) == ()
