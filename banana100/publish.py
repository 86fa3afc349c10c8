"""`banana100 push DATASET_DIR --repo-id ORG/NAME [--dry-run]`: publish a dataset folder on the Hub.

The folder is verified first (`banana100.verify`, skip with `verify=False`), then checked
against the Hub's limits (at most 10,000 files per folder, files under 50 GB, Parquet under
the recommended size), then uploaded with `huggingface_hub`'s resumable uploader for large folders:
`HfApi.upload_large_folder` where the installed version has it (0.25 - 1.x), else
`HfApi.upload_folder`, which since 2.0 streams through Xet storage and commits large folders in
several batches. Either way the large files are hashed and pre-uploaded, and an interrupted push
is resumed by running the same command again (committed files are skipped, uploaded data is
deduplicated).

`dry_run=True` touches no network: it returns (and the CLI prints) the files that would go up,
their sizes and kind (large file or regular), and the plan: create the repo, upload the data
files in commits of at most `files_per_commit` files, the card (`README.md`) in the last one, so
the dataset page shows a card only once the data it describes is there.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import about
from .errors import DatasetError, UsageError

HUB_MAX_FILES_PER_FOLDER = 10_000
HUB_MAX_FILE_BYTES = 50 * 1000**3
RECOMMENDED_PARQUET_BYTES = 500 * 1024**2
FILES_PER_COMMIT = 50  # what upload_large_folder commits at most at once (it starts lower)
_LARGE = (".parquet", ".png", ".jpg", ".jpeg", ".webp", ".tar", ".arrow")


@dataclass
class PushPlan:
    repo_id: str
    dataset_dir: Path
    files: list[tuple[str, int, str]] = field(default_factory=list)  # (path in repo, bytes, "large" | "regular")
    commits: list[list[str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    private: bool = False

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self.files)

    def describe(self) -> str:
        from .dataset_script.build import _human_bytes

        lines = [f"push {self.dataset_dir} -> https://huggingface.co/datasets/{self.repo_id}"
                 f" ({len(self.files)} files, {_human_bytes(self.total_bytes)})", "", "files:"]
        for path, size, kind in self.files:
            lines.append(f"  {path}  {_human_bytes(size)}  ({kind})")
        lines += ["", "plan:",
                  f"  1. create_repo({self.repo_id!r}, repo_type='dataset', private={self.private}, exist_ok=True)",
                  "  2. upload the folder (upload_large_folder, or upload_folder on huggingface_hub >= 2: hashed,"
                  " pre-uploaded, committed in batches; rerun the same command to resume an interrupted push):"]
        for i, commit in enumerate(self.commits, 1):
            size = sum(s for p, s, _ in self.files if p in set(commit))
            head = ", ".join(commit[:3]) + (f", ... ({len(commit) - 3} more)" if len(commit) > 3 else "")
            lines.append(f"     commit {i}/{len(self.commits)}: {len(commit)} file(s), {_human_bytes(size)}: {head}")
        lines.append(f"card: loading lines name {self.repo_id} (README.md's `REPO = ...` line, set on upload)")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _check_repo_id(repo_id: str) -> None:
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UsageError(f"--repo-id {repo_id!r}: expected ORG/NAME")


def plan_push(dataset_dir: str | os.PathLike, repo_id: str, private: bool = False,
              files_per_commit: int = FILES_PER_COMMIT) -> PushPlan:
    """What `push_dataset` would upload, and in which commits; raises DatasetError when the
    folder breaks a Hub limit."""
    dataset_dir = Path(dataset_dir)
    _check_repo_id(repo_id)
    if not (dataset_dir / "README.md").is_file():
        raise DatasetError(f"{dataset_dir} has no README.md (dataset card): build it with `banana100 build-dataset`")
    plan = PushPlan(repo_id, dataset_dir, private=private)
    per_folder: Counter = Counter()
    for root, dirs, names in os.walk(dataset_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .cache (the uploader's), work folders
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(root) / name
            rel = path.relative_to(dataset_dir).as_posix()
            size = path.stat().st_size
            kind = "large" if name.lower().endswith(_LARGE) or size > 10 * 1024**2 else "regular"
            plan.files.append((rel, size, kind))
            per_folder[str(Path(rel).parent)] += 1
            if size > HUB_MAX_FILE_BYTES:
                raise DatasetError(f"{rel} is {size} bytes: over the Hub's 50 GB limit per file")
            if name.endswith(".parquet") and size > RECOMMENDED_PARQUET_BYTES * 1.1:
                plan.warnings.append(f"{rel} is larger than the Hub's recommended {RECOMMENDED_PARQUET_BYTES} bytes")
    crowded = {d: n for d, n in per_folder.items() if n > HUB_MAX_FILES_PER_FOLDER}
    if crowded:
        raise DatasetError(f"folders with more than {HUB_MAX_FILES_PER_FOLDER} files (the Hub's limit): {crowded}")
    card = (dataset_dir / "README.md").read_text(encoding="utf-8")
    if "licence of these images is not known" in card:
        plan.warnings.append("the card says the images' licence is not known: rebuild with --source-licences FILE, "
                             "--source-dataset HUB_ID or --licence ID before publishing")
    data = [p for p, _, _ in plan.files if p != "README.md"]
    plan.commits = [data[i : i + files_per_commit] for i in range(0, len(data), files_per_commit)]
    if plan.commits and len(plan.commits[-1]) < files_per_commit:
        plan.commits[-1].append("README.md")
    else:
        plan.commits.append(["README.md"])
    return plan


def set_card_repo_id(dataset_dir: str | os.PathLike, repo_id: str) -> bool:
    """Point the card's loading lines (`REPO = "..."`) at `repo_id`; True when the card changed."""
    from .dataset_script.build import REPO_LINE

    card = Path(dataset_dir) / "README.md"
    text = card.read_text(encoding="utf-8")
    new = REPO_LINE.sub(f'REPO = "{repo_id}"', text, count=1)
    new = new.replace("\n(`ORG/NAME` stands for the Hub id: `banana100 push --repo-id ORG/NAME` writes it into this line.)\n", "\n")
    if new == text:
        return False
    tmp = card.with_name(".README.md.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, card)
    return True


def push_dataset(dataset_dir: str | os.PathLike, repo_id: str, dry_run: bool = False, private: bool = False,
                 verify: bool = True, token: str | None = None, num_workers: int | None = None) -> PushPlan:
    """Verify, plan and (unless `dry_run`) upload `dataset_dir` to the Hub dataset `repo_id`."""
    _check_repo_id(repo_id)  # a typo in the command line is reported before a long verify
    if verify:
        from .verify import verify_dataset

        report = verify_dataset(dataset_dir)
        if not report.ok:
            shown = "\n  ".join(map(str, report.problems[:20]))
            raise DatasetError(f"{dataset_dir} does not verify; not pushing it:\n  {shown}")
    plan = plan_push(dataset_dir, repo_id, private=private)
    if dry_run:
        return plan
    set_card_repo_id(dataset_dir, repo_id)
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    ignore = [".*", "**/.*"]
    if hasattr(api, "upload_large_folder"):  # huggingface_hub 0.25 - 1.x
        api.upload_large_folder(repo_id=repo_id, folder_path=str(dataset_dir), repo_type="dataset",
                                ignore_patterns=ignore, num_workers=num_workers)
    else:  # 2.x: upload_folder streams through hf_xet, commits in batches and resumes on rerun
        api.upload_folder(repo_id=repo_id, folder_path=str(dataset_dir), repo_type="dataset",
                          ignore_patterns=ignore, commit_message="Upload the Banana100 dataset (banana100 push)")
    return plan


# ---- The metric folders as Hub Spaces ------------------------------------------------------
#
# `evaluate.load("ORG/niqe")` reads the Space `ORG/niqe`: `niqe.py`, and before importing it
# evaluate 0.4.6 parses its top-level `import X` / `from X import` lines (`get_imports`) and
# tries to import each X; when that fails it raises ImportError telling the user to
# `pip install` the text after a `# From:` comment on that line. So every module imports
# banana100 on one line carrying `# From: "<PEP 508 requirement>"`, the same requirement as the
# folder's requirements.txt (which the Space's runtime installs). Both are written from
# `banana100.about` (`sync_metric_folders`), never by hand.

METRIC_SPACE_SDK = "gradio"
SENSITIVITY = "banana100_sensitivity"
_HINT_LINE = re.compile(r"^(import banana100\.evaluate_module as em|from banana100 import [\w, ]+?)(\s+#.*)?$",
                        re.MULTILINE)


def metrics_root() -> Path:
    """The metric folders: inside the installed package (wheel) or beside it (a clone)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "metrics", here.parent / "metrics"):
        if (candidate / SENSITIVITY / f"{SENSITIVITY}.py").is_file():
            return candidate
    raise DatasetError(f"no metric folders found in {here / 'metrics'} or {here.parent / 'metrics'}: "
                       "reinstall banana100 (the wheel ships them) or run from a clone")


def metric_names(metrics_dir: str | os.PathLike | None = None) -> list[str]:
    """Every metric folder (`<name>/<name>.py`): the 21 roster metrics and the protocol."""
    from .registry import METRICS

    root = Path(metrics_dir) if metrics_dir else metrics_root()
    names = [n for n in METRICS if (root / n / f"{n}.py").is_file()]
    return names + ([SENSITIVITY] if (root / SENSITIVITY / f"{SENSITIVITY}.py").is_file() else [])


def metric_extras(name: str) -> tuple[str, ...]:
    """Extras a metric module needs at its default settings: `deep` for the pyiqa-only metrics."""
    from .registry import get_metric

    return () if name == SENSITIVITY or get_metric(name).native else ("deep",)


def metric_requirements(name: str, source: str | None = None) -> str:
    """The folder's requirements.txt (what a Space runtime or a user installs to use it)."""
    extras = metric_extras(name)
    why = ("with its 'deep' extra: pyiqa computes the score" if extras else
           "core only: the default native backend needs no pyiqa" if name != SENSITIVITY else "core only")
    return (f"# {name} needs banana100 {about.VERSION}, {why}. banana100 is not on PyPI: this line\n"
            f"# installs the release from its repository (banana100/about.py: CODE_REPOSITORY, RELEASE_TAG).\n"
            f"{about.requirement(extras, source)}\n")


def metric_hint(name: str, source: str | None = None) -> str:
    """The `# From:` comment evaluate turns into its `pip install ...` hint."""
    return f'# From: "{about.requirement(metric_extras(name), source)}"'


def card_front_matter(card: str | os.PathLike) -> dict:
    """The YAML header of a card (README.md)."""
    import yaml

    text = Path(card).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    return yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}


def render_widget_app(name: str) -> str:
    """app.py of an image metric's Space: the library's widget (`banana100.metric_widget`)."""
    from .registry import get_metric

    spec = get_metric(name)
    return f'''"""Widget of the {spec.display_name} evaluate module (this folder as a Hugging Face Space).

Upload images, get the scores of the module beside this file (loaded as `evaluate.load` does).
Written by `python -m banana100.publish --sync`; the widget is `banana100.metric_widget`.
"""

from pathlib import Path

from banana100 import metric_widget

demo, score = metric_widget.build(Path(__file__).resolve().parent)

if __name__ == "__main__":
    demo.launch()
'''


def _expected_metric_files(folder: Path, name: str, source: str | None) -> dict[str, str]:
    """What sync writes into a metric folder: requirements.txt, the module with its hint, app.py."""
    module = folder / f"{name}.py"
    text = module.read_text(encoding="utf-8")
    if not _HINT_LINE.search(text):
        raise DatasetError(f"{module}: no `import banana100.evaluate_module as em` / `from banana100 import ...` "
                           "line to carry evaluate's install hint")
    text = _HINT_LINE.sub(lambda m: f"{m.group(1)}  {metric_hint(name, source)}", text, count=1)
    out = {f"{name}.py": text, "requirements.txt": metric_requirements(name, source)}
    if name != SENSITIVITY:
        out["app.py"] = render_widget_app(name)
    return out


def space_requirements(source: str | None = None) -> str:
    """space/requirements.txt: the library with its `space` extra, from the same one source."""
    return ("# The Space installs the banana100 library from its repository (banana100 is not on PyPI);\n"
            "# written from banana100/about.py by `python -m banana100.publish --sync`. Locally\n"
            "# (`python space/app.py` in a clone) `bash setup.sh --space` has installed it already.\n"
            f"{about.requirement(('space',), source)}\n")


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

    def describe(self) -> str:
        lines = [f"publish {len(self.spaces)} metric folders as Hugging Face Spaces (sdk {METRIC_SPACE_SDK}) "
                 f"under https://huggingface.co/spaces/{self.org}", f"banana100 installed there from: {self.source}",
                 f"staged in {self.stage_dir}", ""]
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
        wanted = about.requirement(metric_extras(name), source)
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
            card = card.replace(about.requirement(extras), about.requirement(extras, source))
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
    staged = stage_metric_folders(stage, names, source, metrics_dir)
    plan = MetricSpacePlan(org, stage, about.git_source(source), private=private)
    for name, folder in staged:
        files = sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())
        plan.spaces.append((f"{org}/{name}", files))
    if dry_run:
        return plan
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    for (name, folder), (repo_id, _) in zip(staged, plan.spaces):
        api.create_repo(repo_id, repo_type="space", space_sdk=METRIC_SPACE_SDK, private=private, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="space",
                          commit_message=f"banana100 {about.VERSION}: {name} evaluate module")
    return plan


def main(argv: list[str] | None = None) -> int:
    """`python -m banana100.publish --sync [--check]`: keep the metric folders' requirements.txt,
    install hints and widget apps (and space/requirements.txt) in step with banana100/about.py."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m banana100.publish", description=main.__doc__,
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
        print("run: python -m banana100.publish --sync", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
