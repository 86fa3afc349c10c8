"""Image editors: `make_editor(name, **options)` builds one by name.

Known editors are listed in `EDITORS` as import paths, so that an editor with heavy or
optional dependencies is imported only when it is asked for.
"""

from __future__ import annotations

from importlib import import_module

from banana100.errors import UnknownEditorError
from banana100.chains.editors.base import Editor, EditRequest, EditResult

# name -> "module:Class" (module relative to this package)
EDITORS: dict[str, str] = {
    "simulated": ".simulated:SimulatedEditor",
    "gemini": ".gemini:GeminiEditor",
    "diffusers": ".diffusion:DiffusersEditor",
}


def known_editors() -> list[str]:
    return sorted(EDITORS)


def make_editor(name: str, **options) -> Editor:
    """Build the editor called `name` (`simulated`, ...) with its constructor `options`."""
    key = str(name).strip().lower()
    if key not in EDITORS:
        raise UnknownEditorError(f"unknown editor {name!r}; known editors: {', '.join(known_editors())}")
    module_name, class_name = EDITORS[key].split(":")
    cls = getattr(import_module(module_name, __name__), class_name)
    return cls(**options)


__all__ = ["EDITORS", "EditRequest", "EditResult", "Editor", "UnknownEditorError", "known_editors", "make_editor"]
