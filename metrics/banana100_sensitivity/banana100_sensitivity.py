"""Banana100 sensitivity protocol as an `evaluate` module: a thin face over banana100.protocol."""

import datasets
import evaluate

# One line imports banana100: evaluate reads the `# From:` comment on it as its install hint
# (written by `python -m banana100.publish --sync` from banana100/about.py).
from banana100 import about, protocol  # From: "banana100 @ git+https://github.com/banana100/banana100@v0.1.0"


_KWARGS_DESCRIPTION = """
Args:
    scores (list of float): one metric's score per image (NaN, inf or None = no score: a missing
        score, listed by name in `undefined_scores`, never used as a number).
    steps (list of int): the chain step of each image (0 = source).
    chain_ids (list of str): the chain of each image.
    lower_better (bool): True when a lower score means better quality (NIQE, BRISQUE, ...).
    reference_step (int): step the changes are measured from (default 1).
    check_steps (tuple of int): steps that must all score worse (default (5, 10, 20)).
Returns:
    n_chains, n_passed, n_failed, n_incomplete, failure_rate, mean_rho, share_last_worse,
    incomplete_chains, n_undefined_scores, undefined_scores ({chain_id, step} of each missing
    score), per_chain (chain_id, passed, d_<k>, rho, missing_steps, undefined_steps,
    incomplete_reason, last_step, last_worse).
Example:
    >>> p = evaluate.load("metrics/banana100_sensitivity")
    >>> p.compute(scores=[5.0, 4.0, 3.0, 2.0], steps=[1, 5, 10, 20], chain_ids=["a"] * 4)["failure_rate"]
    0.0
"""


@evaluate.utils.file_utils.add_start_docstrings(protocol.__doc__, _KWARGS_DESCRIPTION)
class Banana100Sensitivity(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=protocol.__doc__,
            citation=about.CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"scores": datasets.Value("float64"), "steps": datasets.Value("int64"), "chain_ids": datasets.Value("string")}
            ),
            homepage=about.CODE_REPOSITORY,
            license=f"{about.CODE_LICENCE} (module code)",
            codebase_urls=[about.CODE_REPOSITORY],
            reference_urls=[about.PAPER_URL],
        )

    def _compute(self, scores, steps, chain_ids, lower_better=False, reference_step=protocol.DEFAULT_REFERENCE_STEP,
                 check_steps=protocol.DEFAULT_CHECK_STEPS):
        return protocol.sensitivity(scores, steps, chain_ids, lower_better=lower_better,
                                    reference_step=reference_step, check_steps=check_steps)
