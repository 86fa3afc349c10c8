"""Run folders and their `manifest.jsonl`: crash-safe writes, tolerant reads.

A run folder holds one sub-folder per chain and `manifest.jsonl`, one JSON record per image
(fields: `banana100.schema`). A record is appended only after its image is fully on disk
(temporary file, fsync, rename), so after a crash at any moment the manifest lists only
complete images; at most its last line is cut short, and readers drop that line.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from datetime import datetime, timezone
from pathlib import Path

from banana100.errors import ManifestError
from banana100.fileio import append_locked, drop_partial_tail, open_for_append, turn_lock
from banana100.fileio import path_inside, sha256_bytes, sha256_file, write_file_atomic  # noqa: F401 - re-exported
from banana100.schema import validate_record

MANIFEST_NAME = "manifest.jsonl"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ManifestWriter:
    """Appends records to a run's manifest, one fsynced line each; safe across threads and processes.

    Every line is written whole under an exclusive flock of the manifest (`fileio.append_locked`),
    so the processes of a distributed `generate` share one manifest.jsonl: their lines never
    interleave, and a line a killed process left unfinished is cut before the next one is
    written (its image is adopted or made again on resume, see `banana100.chains.store`). A
    reader sees complete lines, and at most an unfinished last one, which it drops.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / MANIFEST_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd: int | None = open_for_append(self.path)
        with turn_lock(self._fd):  # what an interrupted run left, before this run's first line
            self._cut_warning(drop_partial_tail(self._fd))

    def append(self, record: dict) -> None:
        problems = validate_record(record)
        if problems:
            raise ManifestError(f"refusing to write an invalid record to {self.path}: {'; '.join(problems)}")
        line = (json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise ManifestError(f"{self.path}: the manifest writer is closed")
            self._cut_warning(append_locked(self._fd, line))

    def _cut_warning(self, cut: bool) -> None:
        if cut:
            warnings.warn(f"{self.path}: dropped an incomplete last line left by an interrupted run", stacklevel=3)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_manifest(run_dir: str | os.PathLike) -> list[dict]:
    """Read and validate a run's manifest.

    Drops (with a warning) a last line cut short by a crash and exact duplicate records;
    raises ManifestError naming the file and line for anything else, and for two different
    records of the same chain step.
    """
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST_NAME
    if not run_dir.is_dir():
        raise ManifestError(f"{run_dir}: no such run folder")
    if not path.is_file():
        raise ManifestError(
            f"{run_dir} has no {MANIFEST_NAME}: a run folder is made by `banana100 generate` "
            "(or give a dataset folder instead)"
        )
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    if tail.strip():
        warnings.warn(f"{path}: ignoring an incomplete last line (interrupted write)", stacklevel=2)
    records: list[dict] = []
    seen: dict[tuple[str, int], dict] = {}
    for lineno, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ManifestError(f"{path}, line {lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise ManifestError(f"{path}, line {lineno}: expected a JSON object")
        problems = validate_record(record)
        if problems:
            raise ManifestError(f"{path}, line {lineno}: {'; '.join(problems)}")
        key = (record["chain_id"], record["step"])
        if key in seen:
            if seen[key]["sha256"] == record["sha256"]:
                warnings.warn(f"{path}, line {lineno}: duplicate record of {key} ignored", stacklevel=2)
                continue
            raise ManifestError(
                f"{path}, line {lineno}: chain {key[0]!r} step {key[1]} recorded twice with different images"
            )
        seen[key] = record
        records.append(record)
    return records


def image_path(run_dir: str | os.PathLike, record: dict) -> Path:
    """The file of a record's image; ManifestError when the record's path leaves the run folder
    (absolute, `..`, a symlink out): the one rule for `score` and `build-dataset`."""
    return path_inside(run_dir, record["image"], f"{Path(run_dir) / MANIFEST_NAME}, chain {record['chain_id']!r} "
                       f"step {record['step']}")
