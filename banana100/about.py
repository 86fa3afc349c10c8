"""Facts about the Banana100 release that cards, reports and the Space all quote."""

PAPER_ID = "arXiv:2604.03400"
PAPER_URL = "https://arxiv.org/abs/2604.03400"
ORIGINAL_DATASET = "kenantang/Banana100"
DATA_LICENCE = "cc-by-nc-sa-4.0"  # the original release; datasets built from it inherit it
CODE_LICENCE = "Apache-2.0"
PYIQA_LICENCE = "PolyForm Noncommercial 1.0.0 (pyiqa, since April 2026)"

# The full author list and title are on the arXiv page; we cite by identifier only rather
# than guess them.
CITATION = """\
@misc{banana100,
  title  = {Banana100},
  note   = {CVPR 2026 workshop; arXiv:2604.03400},
  year   = {2026},
  url    = {https://arxiv.org/abs/2604.03400}
}
"""

SIMULATED_EDITOR_NOTE = (
    "Chains made with the `simulated` editor are a model of the degradation the Banana100 paper "
    "reports for Nano Banana Pro (static noise, colour drift, softness, compression), not output "
    "of any real editor; metrics may react to real chains differently."
)
