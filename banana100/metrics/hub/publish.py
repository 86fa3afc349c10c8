"""The metric folders (`metrics/` in a clone, `banana100/metric_modules/` in the wheel) as
evaluate modules and Hugging Face Spaces.

`python -m banana100.metrics.hub.publish --sync [--check]` keeps each folder's generated files
(requirements.txt, the install hint of the module, the widget app) and space/requirements.txt in
step with `banana100/about.py`; `banana100 publish-metrics --org ORG [--dry-run]` stages, checks
and pushes all of them (`push_metrics`).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from banana100 import about
from banana100.extras import requirement
from banana100.errors import DatasetError, UsageError

METRIC_SPACE_SDK = "gradio"
SENSITIVITY = "banana100_sensitivity"
_HINT_LINE = re.compile(r"^(import banana100\.metrics\.module as em)(\s+#.*)?$",
                        re.MULTILINE)


def metrics_root() -> Path:
    """The metric folders: inside the installed package (the wheel's `banana100/metric_modules`)
    or the clone's top-level `metrics/`."""
    package = Path(__file__).resolve().parents[2]
    candidates = (package / "metric_modules", package.parent / "metrics")
    for candidate in candidates:
        if (candidate / SENSITIVITY / f"{SENSITIVITY}.py").is_file():
            return candidate
    raise DatasetError(f"no metric folders found in {candidates[0]} or {candidates[1]}: "
                       "reinstall banana100 (the wheel ships them) or run from a clone")


def metric_path(name: str) -> str:
    """The folder of the evaluate module `name` (any case), wherever banana100 is installed or cloned:
    `evaluate.load(metric_path("niqe"))` works from any working directory."""
    root = metrics_root()
    known = sorted(p.parent.name for p in root.glob("*/*.py") if p.stem == p.parent.name)
    folder = name.strip().lower()
    if folder not in known:
        from banana100.errors import UnknownMetricError
        from banana100.metrics.table import did_you_mean

        raise UnknownMetricError(f"no metric module {name!r}{did_you_mean(folder, known)} in {root} "
                                 f"(there are: {', '.join(known)})")
    return str(root / folder)


def metric_names(metrics_dir: str | os.PathLike | None = None) -> list[str]:
    """Every metric folder (`<name>/<name>.py`): the 21 roster metrics, the edit_damage detector and the protocol."""
    from banana100.metrics.table import METRICS

    root = Path(metrics_dir) if metrics_dir else metrics_root()
    names = [n for n in METRICS if (root / n / f"{n}.py").is_file()]
    return names + ([SENSITIVITY] if (root / SENSITIVITY / f"{SENSITIVITY}.py").is_file() else [])


def metric_extras(name: str) -> tuple[str, ...]:
    """Extras a metric module needs at its default settings: `deep` for the pyiqa-only metrics."""
    from banana100.metrics.table import get_metric

    return () if name == SENSITIVITY or get_metric(name).native else ("deep",)


def metric_requirements(name: str, source: str | None = None) -> str:
    """The folder's requirements.txt (what a Space runtime or a user installs to use it)."""
    extras = metric_extras(name)
    why = ("with its 'deep' extra: pyiqa computes the score" if extras else
           "core only: the default native backend needs no pyiqa" if name != SENSITIVITY else "core only")
    return (f"# {name} needs banana100 {about.VERSION}, {why}. banana100 is not on PyPI: this line\n"
            f"# installs the release from its repository (banana100/about.py: CODE_REPOSITORY, RELEASE_TAG).\n"
            f"{requirement(extras, source)}\n")


def metric_hint(name: str, source: str | None = None) -> str:
    """The `# From:` comment evaluate turns into its `pip install ...` hint."""
    return f'# From: "{requirement(metric_extras(name), source)}"'


def card_front_matter(card: str | os.PathLike) -> dict:
    """The YAML header of a card (README.md)."""
    import yaml

    text = Path(card).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    return yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}


def render_widget_app(name: str) -> str:
    """app.py of an image metric's Space: the library's widget (`banana100.metrics.hub.widget`)."""
    from banana100.metrics.table import get_metric

    spec = get_metric(name)
    return f'''"""Widget of the {spec.display_name} evaluate module (this folder as a Hugging Face Space).

Upload images, get the scores of the module beside this file (loaded as `evaluate.load` does).
Written by `python -m banana100.metrics.hub.publish --sync`; the widget is `banana100.metrics.hub.widget`.
"""

from pathlib import Path

from banana100.metrics.hub import widget as metric_widget

demo, score = metric_widget.build(Path(__file__).resolve().parent)

if __name__ == "__main__":
    demo.launch()
'''


def _expected_metric_files(folder: Path, name: str, source: str | None) -> dict[str, str]:
    """What sync writes into a metric folder: requirements.txt, the module with its hint, app.py."""
    module = folder / f"{name}.py"
    text = module.read_text(encoding="utf-8")
    if not _HINT_LINE.search(text):
        raise DatasetError(f"{module}: no `import banana100.metrics.module as em` "
                           "line to carry evaluate's install hint")
    text = _HINT_LINE.sub(lambda m: f"{m.group(1)}  {metric_hint(name, source)}", text, count=1)
    out = {f"{name}.py": text, "requirements.txt": metric_requirements(name, source)}
    if name != SENSITIVITY:
        out["app.py"] = render_widget_app(name)
    return out


def space_requirements(source: str | None = None) -> str:
    """space/requirements.txt: the library with its `space` extra, from the same one source."""
    return ("# The Space installs the banana100 library from its repository (banana100 is not on PyPI);\n"
            "# written from banana100/about.py by `python -m banana100.metrics.hub.publish --sync`. Locally\n"
            "# (`python space/app.py` in a clone) `bash setup.sh --space` has installed it already.\n"
            f"{requirement(('space',), source)}\n")


def sync_metric_folders(metrics_dir: str | os.PathLike | None = None, check: bool = False,
                        source: str | None = None, space_dir: str | os.PathLike | None = None) -> list[Path]:
    """Write (or with `check`, only list) the files of each metric folder, and
    space/requirements.txt, that differ from what `banana100.about` says; return those paths."""
    root = Path(metrics_dir) if metrics_dir else metrics_root()
    stale = []
    wanted: list[tuple[Path, str]] = []
    for name in metric_names(root):
        wanted += [(root / name / rel, text) for rel, text in _expected_metric_files(root / name, name, source).items()]
    if space_dir is not None:
        wanted.append((Path(space_dir) / "requirements.txt", space_requirements(source)))
    for path, text in wanted:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not check:
                path.write_text(text, encoding="utf-8")
    return stale


@dataclass
class MetricSpacePlan:
    """The Spaces `push_metrics` would create and the files each would hold."""

    org: str
    stage_dir: Path
    source: str
    private: bool = False
    spaces: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)  # (repo id, [(file, bytes)])
    kept: bool = True  # False: staged in a temporary folder, removed once done

    def describe(self) -> str:
        where = (f"staged in {self.stage_dir}" if self.kept else
                 "staged in a temporary folder, removed once done (--stage DIR keeps the staged files)")
        lines = [f"publish {len(self.spaces)} metric folders as Hugging Face Spaces (sdk {METRIC_SPACE_SDK}) "
                 f"under https://huggingface.co/spaces/{self.org}", f"banana100 installed there from: {self.source}",
                 where, ""]
        for repo_id, files in self.spaces:
            listing = ", ".join(f"{f} ({size:,} B)" for f, size in files)
            lines.append(f"  {repo_id}: {listing}")
        lines += ["", "plan, for each: create_repo(repo_type='space', space_sdk='gradio', exist_ok=True), "
                  "upload_folder(the staged folder); then evaluate.load('ORG/NAME') works anywhere banana100 "
                  "installs from the line above"]
        return "\n".join(lines)


def check_metric_folder(folder: Path, name: str, source: str | None = None) -> None:
    """Raise DatasetError unless `folder` is a metric folder as evaluate and the Hub expect it."""
    from packaging.requirements import InvalidRequirement, Requirement

    problems = []
    for rel in (f"{name}.py", "README.md", "requirements.txt"):
        if not (folder / rel).is_file():
            problems.append(f"missing {rel}")
    if not problems:
        meta = card_front_matter(folder / "README.md")
        if meta.get("sdk") != METRIC_SPACE_SDK:
            problems.append(f"README.md: sdk is {meta.get('sdk')!r}, expected {METRIC_SPACE_SDK!r}")
        app = meta.get("app_file")
        if not app or not (folder / app).is_file():
            problems.append(f"README.md declares app_file {app!r}, which is not in the folder")
        lines = [ln for ln in (folder / "requirements.txt").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        wanted = requirement(metric_extras(name), source)
        try:
            reqs = [Requirement(ln) for ln in lines]
        except InvalidRequirement as e:
            problems.append(f"requirements.txt: {e}")
            reqs = []
        if reqs and (len(reqs) != 1 or reqs[0].name != "banana100" or not reqs[0].url or str(reqs[0]) != str(Requirement(wanted))):
            problems.append(f"requirements.txt: expected the one line {wanted!r}, found {lines}")
        if f'pip install "{wanted}"' not in (folder / "README.md").read_text(encoding="utf-8"):
            problems.append(f"README.md does not show the install line: pip install \"{wanted}\"")
        from evaluate.loading import get_imports

        hints = [(n, path) for kind, n, path, _ in get_imports(str(folder / f"{name}.py")) if kind == "library" and n == "banana100"]
        if hints != [("banana100", f'"{wanted}"')]:
            problems.append(f"{name}.py: evaluate would read the install hints {hints}, expected one: \"{wanted}\"")
    if problems:
        raise DatasetError(f"{folder}: not ready for the Hub: " + "; ".join(problems))


def stage_metric_folders(stage_dir: str | os.PathLike, names: list[str] | None = None, source: str | None = None,
                         metrics_dir: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """Copy each metric folder as it goes to the Hub (with `source` as the install line) into
    `stage_dir/<name>/` and check it; return (name, folder) pairs."""
    import shutil

    root = Path(metrics_dir) if metrics_dir else metrics_root()
    known = metric_names(root)
    names = known if not names or names == ["all"] else names
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"no metric folder for {unknown}; known: {', '.join(known)}")
    staged = []
    for name in names:
        src, dest = root / name, Path(stage_dir) / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        card = (src / "README.md").read_text(encoding="utf-8")
        if source:  # the card's install line names the same source as requirements.txt
            extras = metric_extras(name)
            card = card.replace(requirement(extras), requirement(extras, source))
        (dest / "README.md").write_text(card, encoding="utf-8")
        if name == SENSITIVITY:
            shutil.copyfile(src / "app.py", dest / "app.py")
        for rel, text in _expected_metric_files(src, name, source).items():
            (dest / rel).write_text(text, encoding="utf-8")
        check_metric_folder(dest, name, source)
        staged.append((name, dest))
    return staged


def push_metrics(org: str, names: list[str] | None = None, dry_run: bool = False, source: str | None = None,
                 private: bool = False, stage_dir: str | os.PathLike | None = None, token: str | None = None,
                 metrics_dir: str | os.PathLike | None = None) -> MetricSpacePlan:
    """Stage, check and (unless `dry_run`) push every metric folder to the Space `org/<name>`."""
    import tempfile

    if not org or "/" in org:
        raise UsageError(f"--org {org!r}: expected a Hub user or organisation name (no slash)")
    stage = Path(stage_dir) if stage_dir else Path(tempfile.mkdtemp(prefix="banana100-metrics-"))
    try:
        staged = stage_metric_folders(stage, names, source, metrics_dir)
        plan = MetricSpacePlan(org, stage, about.git_source(source), private=private, kept=bool(stage_dir))
        for name, folder in staged:
            files = sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())
            plan.spaces.append((f"{org}/{name}", files))
        if not dry_run:
            _upload(staged, plan, private, token)
        return plan
    finally:  # a folder of our own is removed, pushed or not (offline runs left one behind each time)
        if not stage_dir:
            shutil.rmtree(stage, ignore_errors=True)


def _upload(staged: list[tuple[str, Path]], plan: MetricSpacePlan, private: bool, token: str | None) -> None:
    from huggingface_hub import HfApi

    from banana100.hubio import hub_calls

    api = HfApi(token=token)
    for (name, folder), (repo_id, _) in zip(staged, plan.spaces, strict=True):
        with hub_calls(f"publishing {name} to the Space {repo_id}"):  # offline: one line, no traceback
            api.create_repo(repo_id, repo_type="space", space_sdk=METRIC_SPACE_SDK, private=private, exist_ok=True)
            api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="space",
                              commit_message=f"banana100 {about.VERSION}: {name} evaluate module")


def main(argv: list[str] | None = None) -> int:
    """`python -m banana100.metrics.hub.publish --sync [--check]`: keep the metric folders' requirements.txt,
    install hints and widget apps (and space/requirements.txt) in step with banana100/about.py."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m banana100.metrics.hub.publish", description=main.__doc__,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sync", action="store_true", help="write the generated files of every metric folder")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    ap.add_argument("--metrics-dir", default="metrics", help="folder holding <name>/<name>.py")
    ap.add_argument("--space-dir", default="space", help="the Space folder (its requirements.txt)")
    args = ap.parse_args(argv)
    if not (args.sync or args.check):
        ap.error("give --sync or --check")
    stale = sync_metric_folders(args.metrics_dir, check=args.check, space_dir=args.space_dir)
    for path in stale:
        print(("out of date: " if args.check else "wrote ") + str(path))
    if args.check and stale:
        print("run: python -m banana100.metrics.hub.publish --sync", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
