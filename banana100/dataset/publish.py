"""`banana100 push DATASET_DIR --repo-id ORG/NAME [--dry-run]`: publish a dataset folder on the Hub.

The folder is verified first (`banana100.dataset.verify`, skip with `verify=False`), then checked
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from banana100.dataset.card import human_bytes, with_repo_id
from banana100.dataset.layout import CARD_NAME, SHARD_MAX_BYTES
from banana100.errors import DatasetError, UsageError
from banana100.fileio import write_file_atomic

HUB_MAX_FILES_PER_FOLDER = 10_000
HUB_MAX_FILE_BYTES = 50 * 1000**3
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
        lines = [f"push {self.dataset_dir} -> https://huggingface.co/datasets/{self.repo_id}"
                 f" ({len(self.files)} files, {human_bytes(self.total_bytes)})", "", "files:"]
        for path, size, kind in self.files:
            lines.append(f"  {path}  {human_bytes(size)}  ({kind})")
        lines += ["", "plan:",
                  f"  1. create_repo({self.repo_id!r}, repo_type='dataset', private={self.private}, exist_ok=True)",
                  "  2. upload the folder (upload_large_folder, or upload_folder on huggingface_hub >= 2: hashed,"
                  " pre-uploaded, committed in batches; rerun the same command to resume an interrupted push):"]
        for i, commit in enumerate(self.commits, 1):
            size = sum(s for p, s, _ in self.files if p in set(commit))
            head = ", ".join(commit[:3]) + (f", ... ({len(commit) - 3} more)" if len(commit) > 3 else "")
            lines.append(f"     commit {i}/{len(self.commits)}: {len(commit)} file(s), {human_bytes(size)}: {head}")
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
    if not (dataset_dir / CARD_NAME).is_file():
        raise DatasetError(f"{dataset_dir} has no {CARD_NAME} (dataset card): build it with `banana100 build-dataset`")
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
            if name.endswith(".parquet") and size > SHARD_MAX_BYTES * 1.1:
                plan.warnings.append(f"{rel} is larger than the Hub's recommended {SHARD_MAX_BYTES} bytes")
    crowded = {d: n for d, n in per_folder.items() if n > HUB_MAX_FILES_PER_FOLDER}
    if crowded:
        raise DatasetError(f"folders with more than {HUB_MAX_FILES_PER_FOLDER} files (the Hub's limit): {crowded}")
    card = (dataset_dir / CARD_NAME).read_text(encoding="utf-8")
    if "licence of these images is not known" in card:
        plan.warnings.append("the card says the images' licence is not known: rebuild with --source-licences FILE, "
                             "--source-dataset HUB_ID or --licence ID before publishing")
    data = [p for p, _, _ in plan.files if p != CARD_NAME]
    plan.commits = [data[i : i + files_per_commit] for i in range(0, len(data), files_per_commit)]
    if plan.commits and len(plan.commits[-1]) < files_per_commit:
        plan.commits[-1].append(CARD_NAME)
    else:
        plan.commits.append([CARD_NAME])
    return plan


def set_card_repo_id(dataset_dir: str | os.PathLike, repo_id: str) -> bool:
    """Point the card's loading lines (`REPO = "..."`) at `repo_id`; True when the card changed."""
    card = Path(dataset_dir) / CARD_NAME
    text = card.read_text(encoding="utf-8")
    new = with_repo_id(text, repo_id)
    if new == text:
        return False
    write_file_atomic(card, new.encode("utf-8"))
    return True


def push_dataset(dataset_dir: str | os.PathLike, repo_id: str, dry_run: bool = False, private: bool = False,
                 verify: bool = True, token: str | None = None, num_workers: int | None = None) -> PushPlan:
    """Verify, plan and (unless `dry_run`) upload `dataset_dir` to the Hub dataset `repo_id`."""
    _check_repo_id(repo_id)  # a typo in the command line is reported before a long verify
    if verify:
        from banana100.dataset.verify import verify_dataset

        report = verify_dataset(dataset_dir)
        if not report.ok:
            shown = "\n  ".join(map(str, report.problems[:20]))
            raise DatasetError(f"{dataset_dir} does not verify; not pushing it:\n  {shown}")
    plan = plan_push(dataset_dir, repo_id, private=private)
    if dry_run:
        return plan
    set_card_repo_id(dataset_dir, repo_id)
    from huggingface_hub import HfApi

    from banana100.hubio import hub_calls

    api = HfApi(token=token)
    ignore = [".*", "**/.*"]
    with hub_calls(f"pushing {dataset_dir} to the dataset {repo_id}"):  # offline: one line, no traceback
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if hasattr(api, "upload_large_folder"):  # huggingface_hub 0.25 - 1.x
            api.upload_large_folder(repo_id=repo_id, folder_path=str(dataset_dir), repo_type="dataset",
                                    ignore_patterns=ignore, num_workers=num_workers)
        else:  # 2.x: upload_folder streams through hf_xet, commits in batches and resumes on rerun
            api.upload_folder(repo_id=repo_id, folder_path=str(dataset_dir), repo_type="dataset",
                              ignore_patterns=ignore, commit_message="Upload the Banana100 dataset (banana100 push)")
    return plan

