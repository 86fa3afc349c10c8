"""The Banana100 sensitivity protocol (arXiv 2604.03400, section "Metric sensitivity").

For each chain, orient the scores so that lower means worse (negate them when the metric is
lower-is-better). With d_k = oriented(step k) - oriented(reference step), a chain *passes*
when every d_k over the check steps is < 0: the metric saw the image get worse at each of
them. A tie is a failure (the metric did not see the damage). A chain lacking the reference
step or a check step is *incomplete*: neither passed nor failed, listed, and left out of the
failure rate's denominator. A NaN, infinite or None score is a *missing* score, never a number: the
metric had no score for that image (unreadable, too small, a uniform image it cannot score;
the `error` column of `banana100 score` says why). Each such (chain, step) is listed by name in
`undefined_scores`, and per chain in `undefined_steps`; where it is a needed step, the chain is
incomplete and its `incomplete_reason` says which steps are absent and which have no score.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

import numpy as np
from scipy.stats import spearmanr

DEFAULT_REFERENCE_STEP = 1
DEFAULT_CHECK_STEPS = (5, 10, 20)


def check_steps_for(last_step: int, reference_step: int = DEFAULT_REFERENCE_STEP) -> tuple[int, ...]:
    """The paper's check steps when chains reach step 20; for shorter chains the same shape
    scaled down (a quarter, half and all of the chain: 2, 5, 10 for ten steps), keeping only
    steps after the reference. Empty when the chain ends at the reference step or before."""
    if last_step >= max(DEFAULT_CHECK_STEPS):
        return DEFAULT_CHECK_STEPS
    return tuple(sorted({k for k in (last_step // 4, last_step // 2, last_step) if k > reference_step}))


def _spearman(steps: list[int], values: list[float]) -> float | None:
    """Spearman's rho of oriented score against step; None when undefined (< 3 points, constant)."""
    if len(steps) < 3 or len(set(values)) < 2:
        return None
    rho = spearmanr(steps, values).statistic
    return None if math.isnan(rho) else float(rho)


def chain_verdict(
    by_step: dict[int, float],
    reference_step: int = DEFAULT_REFERENCE_STEP,
    check_steps: Sequence[int] = DEFAULT_CHECK_STEPS,
) -> dict:
    """Verdict for one chain from its oriented scores {step: score} (NaN / inf scores count as missing).

    `missing_steps`: needed steps with no usable score: absent from the input, or present with a
    NaN / infinite score. `undefined_steps`: every step (needed or not) whose score is NaN / inf.
    """
    present = {s: v for s, v in by_step.items() if math.isfinite(v)}
    needed = [reference_step, *check_steps]
    missing = [s for s in needed if s not in present]
    undefined = [s for s in missing if s in by_step]
    absent = [s for s in missing if s not in by_step]
    reasons = []
    if absent:
        reasons.append(f"step{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} absent")
    if undefined:
        reasons.append(f"no score at step{'s' if len(undefined) > 1 else ''} {', '.join(map(str, undefined))}")
    deltas = {
        f"d_{k}": (present[k] - present[reference_step]) if k in present and reference_step in present else None
        for k in check_steps
    }
    passed = None if missing else all(d < 0 for d in deltas.values())
    steps_sorted = sorted(present)
    last_step = steps_sorted[-1] if steps_sorted else None
    last_worse = None
    if last_step is not None and reference_step in present and last_step > reference_step:
        last_worse = present[last_step] < present[reference_step]
    return {
        "passed": passed,
        **deltas,
        "rho": _spearman(steps_sorted, [present[s] for s in steps_sorted]),
        "missing_steps": missing,
        "undefined_steps": sorted(s for s, v in by_step.items() if not math.isfinite(v)),
        "incomplete_reason": "; ".join(reasons) or None,
        "last_step": last_step,
        "last_worse": last_worse,
    }


def sensitivity(
    scores: Sequence[float],
    steps: Sequence[int],
    chain_ids: Sequence[str],
    lower_better: bool | None = None,
    reference_step: int = DEFAULT_REFERENCE_STEP,
    check_steps: Sequence[int] = DEFAULT_CHECK_STEPS,
) -> dict:
    """Apply the protocol to one metric's scores over many chains.

    The direction is required, never guessed: `lower_better=True/False` (PIQE's scores read the
    wrong way round turn a 100 % failure rate into about 50 %). The protocol knows no metric: the
    metric table's direction of a named metric is `banana100.metrics.table.score_direction`, which
    the evaluate module `banana100_sensitivity` applies to its `metric=`.

    Returns `n_chains`, `n_passed`, `n_failed`, `n_incomplete`, `failure_rate`
    (n_failed / (n_chains - n_incomplete); None when no chain is complete), `mean_rho` (over
    chains where rho is defined), `share_last_worse` (share of chains whose last step scores
    worse than the reference step), `incomplete_chains`, `n_undefined_scores` and
    `undefined_scores` (every input whose score is NaN or None, as {chain_id, step}, whether or
    not its step is needed), and `per_chain` (one dict per chain with `chain_id`, `passed`
    (True/False/None), `d_<k>`, `rho`, `missing_steps`, `undefined_steps`, `incomplete_reason`, ...).
    """
    if not (len(scores) == len(steps) == len(chain_ids)):
        raise ValueError(
            f"scores, steps and chain_ids must have the same length (got {len(scores)}, {len(steps)}, {len(chain_ids)})"
        )
    if not isinstance(lower_better, (bool, np.bool_)):
        from banana100.errors import UsageError

        raise UsageError(f"lower_better must be True or False (a lower score means better quality: NIQE, BRISQUE, "
                         f"PIQE, IL-NIQE, PI), got {lower_better!r}; the evaluate module banana100_sensitivity "
                         "also takes metric=<a pyiqa id>")
    check_steps = tuple(int(k) for k in check_steps)
    if not check_steps:
        raise ValueError("check_steps must name at least one step")
    if any(k == reference_step for k in check_steps):
        raise ValueError(f"check_steps {check_steps} must not contain the reference step {reference_step}")
    sign = -1.0 if lower_better else 1.0
    chains: dict[str, dict[int, float]] = defaultdict(dict)
    for score, step, cid in zip(scores, steps, chain_ids, strict=True):
        step = int(step)
        if step in chains[cid]:
            raise ValueError(f"chain {cid!r} has more than one score for step {step}")
        value = float("nan") if score is None else float(score)
        chains[cid][step] = sign * value

    per_chain = []
    for cid in sorted(chains):
        per_chain.append({"chain_id": cid, **chain_verdict(chains[cid], reference_step, check_steps)})

    n_failed = sum(c["passed"] is False for c in per_chain)
    n_passed = sum(c["passed"] is True for c in per_chain)
    incomplete = [c["chain_id"] for c in per_chain if c["passed"] is None]
    n_complete = len(per_chain) - len(incomplete)
    undefined_scores = [{"chain_id": c["chain_id"], "step": s} for c in per_chain for s in c["undefined_steps"]]
    rhos = [c["rho"] for c in per_chain if c["rho"] is not None]
    last = [c["last_worse"] for c in per_chain if c["last_worse"] is not None]
    return {
        "n_chains": len(per_chain),
        "n_passed": n_passed,
        "n_failed": n_failed,
        "n_incomplete": len(incomplete),
        "failure_rate": (n_failed / n_complete) if n_complete else None,
        "mean_rho": float(np.mean(rhos)) if rhos else None,
        "share_last_worse": (sum(last) / len(last)) if last else None,
        "incomplete_chains": incomplete,
        "n_undefined_scores": len(undefined_scores),
        "undefined_scores": undefined_scores,
        "reference_step": reference_step,
        "check_steps": list(check_steps),
        "lower_better": bool(lower_better),
        "per_chain": per_chain,
    }
