"""Facts about the Banana100 release that cards, reports and the Space all quote, and where
this toolkit itself is installed from."""

from __future__ import annotations

import importlib.util

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
# is written from these two lines: the ONE place to change when the repository moves.
# `banana100 publish-metrics --source URL` overrides it for one push.
CODE_REPOSITORY = "https://github.com/banana100/banana100"
RELEASE_TAG = f"v{__version__}"
VERSION = __version__

# extra -> (module whose presence proves the extra is installed, what it brings)
EXTRAS = {
    "deep": ("pyiqa", "the 15 deep metrics and backend='pyiqa' (pyiqa 0.1.16: PolyForm Noncommercial 1.0.0)"),
    "gemini": ("google.genai", "the gemini editor (google-genai)"),
    "space": ("gradio", "the Gradio Space and the metric widget apps (gradio)"),
    "vlm": ("transformers", "the VisualQuality-R1 evaluator (transformers, Qwen2.5-VL)"),
    "diffusers": ("diffusers", "the diffusers editor: open image editors on your own GPU (diffusers, transformers)"),
}
# top-level module -> the extra that brings it (for ModuleNotFoundError raised deeper down)
MODULE_EXTRAS = {"pyiqa": "deep", "timm": "deep", "torchvision": "deep", "clip": "deep", "icecream": "deep",
                 "google": "gemini", "gradio": "space",
                 "transformers": "vlm", "diffusers": "diffusers"}


def git_source(source: str | None = None) -> str:
    """`git+URL@TAG` of this release (or `source` as given, when it is already a pip URL)."""
    if source:
        return source
    return f"git+{CODE_REPOSITORY}@{RELEASE_TAG}"


def requirement(extras: tuple[str, ...] | list[str] = (), source: str | None = None) -> str:
    """A PEP 508 line that installs this release with `extras`:
    `banana100[deep] @ git+https://github.com/.../banana100@v0.1.0`."""
    unknown = sorted(set(extras) - set(EXTRAS))
    if unknown:
        raise ValueError(f"unknown extra(s) {unknown}; known: {sorted(EXTRAS)}")
    name = "banana100" + (f"[{','.join(sorted(set(extras)))}]" if extras else "")
    return f"{name} @ {git_source(source)}"


def install_hint(extra: str) -> str:
    """The pip command that adds `extra` (quoted for a shell), and its form in a clone."""
    return f"pip install '{requirement((extra,))}' (in a clone of the repository: pip install -e '.[{extra}]')"


def extra_installed(extra: str) -> bool:
    module = EXTRAS[extra][0]
    try:
        return importlib.util.find_spec(module) is not None
    except (ModuleNotFoundError, ValueError):  # parent package absent (google.genai); a module set to None
        return False


def require_extra(extra: str, what: str) -> None:
    """Raise MissingExtraError naming the extra to install unless `extra` is installed."""
    if not extra_installed(extra):
        from banana100.errors import MissingExtraError

        raise MissingExtraError(f"{what} needs the '{extra}' extra of banana100 ({EXTRAS[extra][1]}), "
                                f"which is not installed: {install_hint(extra)}")
