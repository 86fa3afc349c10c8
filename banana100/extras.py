"""The optional extras of banana100: which extra brings which module, whether one is installed,
the pip line that installs this release with extras, and the error that names the extra a
feature needs. Where the release installs from (repository, tag) is `banana100.about`'s."""

from __future__ import annotations

import importlib.util

from banana100.about import git_source

# extra -> (module whose presence proves the extra is installed, what it brings)
EXTRAS = {
    "deep": ("pyiqa", "the 15 deep metrics and backend='pyiqa' (pyiqa 0.1.16: PolyForm Noncommercial 1.0.0)"),
    "gemini": ("google.genai", "the gemini editor (google-genai)"),
    "openai": ("openai", "the openai editor: GPT Image (openai)"),
    "space": ("gradio", "the Gradio Space and the metric widget apps (gradio)"),
    "vlm": ("transformers", "the VisualQuality-R1 evaluator (transformers, Qwen2.5-VL)"),
    "diffusers": ("diffusers", "the diffusers editor: open image editors on your own GPU (diffusers, transformers)"),
}
# top-level module -> the extra that brings it (for ModuleNotFoundError raised deeper down)
MODULE_EXTRAS = {"pyiqa": "deep", "timm": "deep", "torchvision": "deep", "clip": "deep", "icecream": "deep",
                 "google": "gemini", "openai": "openai", "gradio": "space",
                 "transformers": "vlm", "diffusers": "diffusers"}


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
