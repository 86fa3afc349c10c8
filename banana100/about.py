"""Facts about the Banana100 release that cards, reports and the Space all quote, and where
this toolkit itself is installed from. Which extra brings what, and the pip line that adds it:
`banana100.extras`."""

from __future__ import annotations

from banana100 import __version__

PAPER_ID = "arXiv:2604.03400"
PAPER_URL = "https://arxiv.org/abs/2604.03400"
ORIGINAL_DATASET = "kenantang/Banana100"
DATA_LICENCE = "cc-by-nc-sa-4.0"  # the original release; datasets built from it inherit it
CODE_LICENCE = "Apache-2.0"
PYIQA_LICENCE = "PolyForm Noncommercial 1.0.0 (pyiqa, since April 2026)"

PAPER_TITLE = "Banana100: Breaking NR-IQA Metrics by 100 Iterative Image Replications with Nano Banana Pro"
CITATION = """\
@misc{tang2026banana100,
  title         = {Banana100: Breaking NR-IQA Metrics by 100 Iterative Image Replications with Nano Banana Pro},
  author        = {Tang, Kenan and Arunshankar, Praveen and Hua, Andong and Yang, Anthony and Qin, Yao},
  year          = {2026},
  eprint        = {2604.03400},
  archivePrefix = {arXiv},
  primaryClass  = {cs.CV},
}
"""

SIMULATED_EDITOR_NOTE = (
    "Chains made with the `simulated` editor are a model of the degradation the Banana100 paper "
    "reports for Nano Banana Pro (static noise, colour drift, softness, compression), not output "
    "of any real editor; metrics may react to real chains differently."
)


# ---- Installing this toolkit ---------------------------------------------------------------
# banana100 is not on PyPI. Everything that tells a machine how to install it (each metric
# folder's requirements.txt and evaluate install hint, space/requirements.txt, error messages)
# is written from these two lines (through banana100.extras.requirement): the ONE place to
# change when the repository moves.
# `banana100 publish-metrics --source URL` overrides it for one push.
CODE_REPOSITORY = "https://github.com/banana100/banana100"
RELEASE_TAG = f"v{__version__}"
VERSION = __version__


def git_source(source: str | None = None) -> str:
    """`git+URL@TAG` of this release (or `source` as given, when it is already a pip URL)."""
    if source:
        return source
    return f"git+{CODE_REPOSITORY}@{RELEASE_TAG}"
