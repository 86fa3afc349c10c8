"""Image editors: `make_editor(name, **options)` builds one by name.

`name` is one of:

- a built-in editor (`EDITORS`, import paths, so that an editor with heavy or optional
  dependencies is imported only when it is asked for);
- an editor an installed package adds: an entry point of the group `banana100.editors`
  (`my_editor = my_package.module:MyEditor` in its pyproject's
  `[project.entry-points."banana100.editors"]`);
- your own class, `path/to/file.py:Class` or `package.module:Class` (a file with one editor
  class may leave `:Class` out).

A user's class subclasses `Editor` (or is a plain class with the same `edit`); see
docs/own-editor.md. Every problem with a user's module is one line naming it (UnknownEditorError).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from banana100.errors import UnknownEditorError
from banana100.chains.editors.base import Editor, EditRequest, EditResult

# name -> "module:Class" (module relative to this package)
EDITORS: dict[str, str] = {
    "simulated": ".simulated:SimulatedEditor",
    "gemini": ".gemini:GeminiEditor",
    "diffusers": ".diffusion:DiffusersEditor",
    "openai": ".openai_images:OpenAIEditor",
    "xai": ".xai:XAIEditor",
    "bfl": ".bfl:BFLEditor",
}
ENTRY_POINT_GROUP = "banana100.editors"


def _installed() -> dict:
    """Entry points of installed packages, by lower-case name (a built-in name wins)."""
    try:
        found = entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # noqa: BLE001 - a broken distribution's metadata must not break the built-ins
        return {}
    return {ep.name.strip().lower(): ep for ep in found if ep.name.strip().lower() not in EDITORS}


def known_editors() -> list[str]:
    return sorted(EDITORS) + sorted(_installed())


def is_own_editor(name: str) -> bool:
    """True for `file.py[:Class]` and `module:Class` specs (the user's own class)."""
    key = str(name).strip()
    return ":" in key or key.endswith(".py")


def editor_class(name: str) -> type:
    """The class of editor `name` (see the module doc); UnknownEditorError names what is wrong."""
    key = str(name).strip().lower()
    if key in EDITORS:
        module_name, class_name = EDITORS[key].split(":")
        return getattr(import_module(module_name, __name__), class_name)
    installed = _installed()
    if key in installed:
        ep = installed[key]
        where = f"--editor {name} (entry point {ep.value!r} of group {ENTRY_POINT_GROUP})"
        try:
            cls = ep.load()
        except Exception as e:  # noqa: BLE001 - anything the package raises at import
            raise UnknownEditorError(f"{where}: loading it raised {type(e).__name__}: {_one_line(e)}") from None
        return _checked(cls, where)
    if is_own_editor(name):
        return _own_class(str(name).strip())
    raise UnknownEditorError(
        f"unknown editor {name!r}; known editors: {', '.join(known_editors())}; or your own class as "
        "path/to/file.py:Class or package.module:Class (docs/own-editor.md)"
    )


def make_editor(name: str, **options) -> Editor:
    """Build the editor called `name` (`simulated`, `./my_editor.py:MyEditor`, ...) with its
    constructor `options`."""
    cls = editor_class(name)
    if str(name).strip().lower() in EDITORS:
        return cls(**options)
    try:
        return cls(**options)
    except Exception as e:  # noqa: BLE001 - a user's constructor: one line, not a traceback
        raise UnknownEditorError(f"--editor {name}: {cls.__name__}({_args(options)}) raised "
                                 f"{type(e).__name__}: {_one_line(e)}") from None


def _own_class(spec: str) -> type:
    target, _, class_name = spec.rpartition(":") if ":" in spec else (spec, "", "")
    where = f"--editor {spec}"
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _load_file(Path(target), where)
    else:
        if not target:
            raise UnknownEditorError(f"{where}: expected path/to/file.py:Class or package.module:Class")
        try:
            module = import_module(target)
        except ModuleNotFoundError as e:
            if e.name and target.startswith(e.name):
                raise UnknownEditorError(f"{where}: no module named {e.name!r} (is the package installed, or "
                                         "did you mean a file, path/to/file.py:Class?)") from None
            raise UnknownEditorError(f"{where}: importing {target} raised {type(e).__name__}: {_one_line(e)}") from None
        except Exception as e:  # noqa: BLE001 - anything the module raises at import
            raise UnknownEditorError(f"{where}: importing {target} raised {type(e).__name__}: {_one_line(e)}") from None
    if not class_name:
        found = [obj for obj in vars(module).values() if inspect.isclass(obj) and obj.__module__ == module.__name__
                 and issubclass(obj, Editor) and not inspect.isabstract(obj)]
        if len(found) != 1:
            listed = ", ".join(c.__name__ for c in found) or "none"
            raise UnknownEditorError(f"{where}: name the class, {target}:ClassName (Editor classes there: {listed})")
        return _checked(found[0], where)
    cls = getattr(module, class_name, None)
    if cls is None:
        classes = [n for n, obj in vars(module).items() if inspect.isclass(obj) and obj.__module__ == module.__name__]
        raise UnknownEditorError(f"{where}: {target} has no class {class_name!r} (classes there: "
                                 f"{', '.join(classes) or 'none'})")
    return _checked(cls, where)


def _load_file(path: Path, where: str):
    if not path.is_file():
        raise UnknownEditorError(f"{where}: no such file {path}")
    # one module per file (its resolved path), so that two files of one name do not collide
    name = "banana100_own_editor_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UnknownEditorError(f"{where}: {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ImportError, SystemExit... at import: one line
        del sys.modules[name]
        if isinstance(e, KeyboardInterrupt):
            raise
        line = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        raise UnknownEditorError(f"{where}: importing {path} raised {type(e).__name__}{line}: {_one_line(e)}") from None
    return module


def _checked(cls, where: str) -> type:
    """`cls` as an Editor class: refused with one line when it is not a class or has no `edit`;
    a plain class with `edit` is adapted (Editor's defaults for every other hook)."""
    if not inspect.isclass(cls):
        raise UnknownEditorError(f"{where}: {cls!r} is not a class")
    edit = getattr(cls, "edit", None)
    if not callable(edit) or getattr(edit, "__isabstractmethod__", False):
        raise UnknownEditorError(f"{where}: class {cls.__name__} has no edit(self, request) method: an editor "
                                 "must write edit (docs/own-editor.md)")
    if issubclass(cls, Editor):
        adapted = cls
    else:
        adapted = type(cls.__name__, (cls, Editor), {"__module__": cls.__module__, "__doc__": cls.__doc__})
    if not isinstance(getattr(adapted, "name", None), str) or not adapted.name:
        adapted.name = cls.__name__
    if not isinstance(getattr(adapted, "model", None), str) or not adapted.model:
        adapted.model = adapted.name
    adapted.editor_spec = where.removeprefix("--editor ")
    return adapted


def _args(options: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items())


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or "(no message)"


__all__ = ["EDITORS", "ENTRY_POINT_GROUP", "EditRequest", "EditResult", "Editor", "UnknownEditorError",
           "editor_class", "is_own_editor", "known_editors", "make_editor"]
