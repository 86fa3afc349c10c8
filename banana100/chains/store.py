"""A run folder on disk: its lock, its parameters (`run.json`), the writes of each step, and the
ledger of chains an editor stopped.

A run folder (see `banana100.chains.manifest` and the design's "Chains on disk") holds:
- `run.json`: the parameters fixed for the folder (editor, model, setting, base seed, and the
  editor's own options that shape every image, `Editor.fixed_options`: the diffusers editor's
  denoising steps and guidance scale), written on the first run; a rerun with different ones is
  refused before any model is loaded, while --steps and --repeats may grow;
- `manifest.jsonl`: one record per image, appended only after the image is fully on disk;
- `<chain_id>/step_000.png` (the source, decoded to RGB), `step_001.png`, ... one folder per
  chain, `chain_id` from `banana100.schema.chain_id`; a same-chat chain also keeps each
  step's conversation turn, `step_NNN.turn.json` (banana100.chains.chat);
- `calls.jsonl`: every call of a service editor (banana100.chains.budget);
- `stopped.jsonl`: chains an editor stopped (e.g. repeated safety blocks), with the reason.

A step's record is also written beside its image (`.step_NNN.record.json`, before the image's
atomic rename), so a step whose image reached the disk but whose manifest line did not (a
crash between the two) is adopted on resume, not made (and paid for) again. Any other step
image that the manifest does not list (an emptied, cut or lost manifest) makes `generate` refuse
the folder (`check_unrecorded_images`) rather than make, pay for and overwrite those steps again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from banana100 import __version__
from banana100.chains.editors.base import Editor
from banana100.chains.manifest import MANIFEST_NAME, ManifestWriter, sha256_bytes, utc_now, write_file_atomic
from banana100.chains.settings import Setting
from banana100.errors import ManifestError, RunMismatchError
from banana100.fileio import ExclusiveLock, append_locked, open_for_append

RUN_FILE = "run.json"
LOCK_FILE = ".generate.lock"
STOPPED_FILE = "stopped.jsonl"  # chains an editor stopped (ChainStopped), with the reason
RUN_FORMAT = 1
FIXED_PARAMETERS = ("editor", "model", "setting", "seed")  # may not change within a run folder
# ... nor may the editor's fixed options (`Editor.fixed_options`), recorded beside them in run.json


def image_rel(chain_id: str, step: int) -> str:
    """The image of a step, relative to the run folder (the record's `image`)."""
    return f"{chain_id}/step_{step:03d}.png"


def _pending_record_name(step: int) -> str:
    """The record written next to an image before the image itself (see `RunStore.write`)."""
    return f".step_{step:03d}.record.json"


def run_parameters(editor: Editor, setting: Setting, seed: int) -> dict:
    """What run.json fixes for the folder: FIXED_PARAMETERS, then the editor's fixed options."""
    options = editor.fixed_options()
    clash = sorted(set(options) & set(FIXED_PARAMETERS))
    if clash:
        raise TypeError(f"{type(editor).__name__}.fixed_options() may not name {clash}")
    return {"editor": editor.name, "model": editor.model, "setting": setting.name, "seed": int(seed), **options}


def check_run_parameters(run_dir: Path, params: dict, flags: dict | None = None) -> None:
    """Refuse to run into a folder whose run.json records other fixed parameters (read-only; nothing
    when there is no run.json yet). `flags`: how the user gives each editor option (for the message).
    An editor option absent from run.json (a folder made before it was recorded) is not checked."""
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        return
    _check_stored(run_dir, _read_run_file(path), params, flags or {})


def _read_run_file(path: Path) -> dict:
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, dict):
            raise TypeError("not a JSON object")
    except (OSError, ValueError, TypeError) as e:
        raise ManifestError(f"{path}: cannot read the run parameters ({e})") from None
    return stored


def _check_stored(run_dir: Path, stored: dict, params: dict, flags: dict) -> None:
    diffs = [k for k in FIXED_PARAMETERS if stored.get(k) != params[k]]
    if diffs:
        was = ", ".join(f"{k}={stored.get(k)!r}" for k in FIXED_PARAMETERS)
        now = ", ".join(f"{k}={params[k]!r}" for k in FIXED_PARAMETERS)
        raise RunMismatchError(
            f"{run_dir} was made with {was}; this command asks for {now} (different {', '.join(diffs)}). "
            "A run folder holds one editor, model, setting and seed (only --steps and --repeats may grow): "
            "use another --out folder."
        )
    options = [k for k in params if k not in FIXED_PARAMETERS and k in stored and stored[k] != params[k]]
    if not options:
        return

    def given(k: str, value) -> str:
        return f"no {flags.get(k, k)}" if value is None else f"{flags.get(k, k)} {value}"

    was = "; and with ".join(
        f"{given(k, stored[k])} ({k}={json.dumps(stored[k])} in {RUN_FILE}), but this command gives "
        f"{given(k, params[k])}{' (the default)' if params[k] is None else ''}" for k in options)
    fix = " and ".join(f"leave {flags.get(k, k)} out" if stored[k] is None else f"give {given(k, stored[k])}"
                       for k in options)
    raise RunMismatchError(
        f"{run_dir} was made with {was}. A run folder's chains are all made with the same settings (only "
        f"--steps and --repeats may grow): {fix} to resume them, or use another --out folder."
    )


def check_run_file(run_dir: Path, params: dict, has_records: bool, sources, flags: dict | None = None) -> None:
    """Write run.json on the first run; refuse a rerun with different fixed parameters."""
    path = run_dir / RUN_FILE
    manifest = run_dir / MANIFEST_NAME
    if not path.exists():
        if has_records:
            raise ManifestError(
                f"{run_dir} has a {MANIFEST_NAME} but no {RUN_FILE}, so its editor, setting and seed are "
                f"unknown; it was not made by `banana100 generate` or {RUN_FILE} was deleted. "
                "Use a new --out folder."
            )
        record = {
            "format": RUN_FORMAT,
            **params,
            "created_at": utc_now(),
            "banana100_version": __version__,
            "sources": str(sources) if isinstance(sources, (str, os.PathLike)) else None,
        }
        manifest.touch()  # before run.json: a run.json without a manifest means a lost manifest
        write_file_atomic(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
        return
    _check_stored(run_dir, _read_run_file(path), params, flags or {})


def check_unrecorded_images(run_dir: Path, records: list[dict]) -> None:
    """Refuse a run folder holding step images that its manifest does not list (a lost, emptied,
    cut or replaced manifest): generating again would make (and pay for) those steps anew and
    overwrite them. Step 0 (the source, free to redo) and a step with its side record (a crash
    before its manifest line: adopted on resume, see `RunStore.adopt`) are not counted."""
    recorded = {r["image"] for r in records}
    unrecorded = []
    for image in sorted(run_dir.glob("*/step_*.png")):
        step = _step_of(image.name)
        rel = image.relative_to(run_dir).as_posix()
        if step is None or step == 0 or rel in recorded or (image.parent / _pending_record_name(step)).is_file():
            continue
        unrecorded.append(rel)
    if not unrecorded:
        return
    manifest = run_dir / MANIFEST_NAME
    shown = ", ".join(unrecorded[:3]) + (", ..." if len(unrecorded) > 3 else "")
    if not manifest.exists():
        raise ManifestError(
            f"{run_dir} has {RUN_FILE + ' and ' if (run_dir / RUN_FILE).exists() else ''}images ({shown}) but no "
            f"{MANIFEST_NAME}: the manifest "
            f"was lost, and generating again would make (and pay for) every step anew over the images there. "
            f"Restore {manifest} from a backup, or use a new --out folder"
        )
    chains = sorted({rel.split("/")[0] for rel in unrecorded})
    raise ManifestError(
        f"{run_dir}: {len(unrecorded)} image{'s' if len(unrecorded) > 1 else ''} of {len(chains)} "
        f"chain{'s' if len(chains) > 1 else ''} ({shown}) are not in {manifest}, which was emptied, cut short or "
        f"replaced: generating again would make (and pay for) those steps anew and overwrite them. Restore "
        f"{MANIFEST_NAME} from a backup; or move those chain folders ({', '.join(chains[:3])}"
        f"{', ...' if len(chains) > 3 else ''}) out of {run_dir} to make them again; or use a new --out folder"
    )


def _step_of(name: str) -> int | None:
    """`step_012.png` -> 12; None for any other name."""
    digits = name[len("step_"):-len(".png")]
    return int(digits) if digits.isdigit() else None


class RunLock(ExclusiveLock):
    """An exclusive lock on a run folder, so that two runs never append to one manifest."""

    def __init__(self, run_dir: Path):
        super().__init__(Path(run_dir) / LOCK_FILE, run_dir, "banana100 generate")


class ProcessLocks:
    """The locks of one process of a distributed run (`accelerate launch`/`torchrun`, see
    runner.generate_chains): the run folder's lock taken shared by every process, so that a lone run
    is refused while any of them works (and they while it works), and the process's own rank lock
    taken exclusively, so that a second distributed run into the same folder is refused."""

    def __init__(self, run_dir: Path, rank: int):
        run_dir = Path(run_dir)
        self.locks = (ExclusiveLock(run_dir / LOCK_FILE, run_dir, "banana100 generate", shared=True),
                      ExclusiveLock(run_dir / f"{LOCK_FILE}.rank{rank}", run_dir, "banana100 generate"))

    def __enter__(self):
        self.locks[0].__enter__()
        try:
            self.locks[1].__enter__()
        except BaseException:
            self.locks[0].__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        self.locks[1].__exit__(*exc)
        self.locks[0].__exit__(*exc)


class RunStore:
    """The writes of a locked run folder: each step's side record, image and manifest line.

    `on_written()` is called once per image recorded (the progress bar). Safe to call from
    several threads for different chains; the steps of one chain must be written in order.
    """

    def __init__(self, run_dir: Path, on_written: Callable[[], None]):
        self.run_dir = run_dir
        self.writer = ManifestWriter(run_dir)
        self.on_written = on_written
        self.lock = threading.Lock()  # for the stopped ledger

    def close(self) -> None:
        self.writer.close()

    def prepare_chain(self, chain_id: str, next_step: int) -> None:
        """Make the chain's folder; drop what a crash left: temporary files, and side records of
        steps already in the manifest (the run is locked, and in a distributed run each chain
        belongs to one process, so nothing else is writing in this folder)."""
        chain_dir = self.run_dir / chain_id
        chain_dir.mkdir(parents=True, exist_ok=True)
        for stale in chain_dir.glob("*.step_*.tmp-*"):
            try:
                stale.unlink()
            except OSError:
                pass
        for old in chain_dir.glob(".step_*.record.json"):
            try:
                if int(old.name[6:9]) < next_step:
                    old.unlink()
            except (OSError, ValueError):
                pass

    def write(self, record: dict, data: bytes) -> None:
        """Side record, then the image, then the manifest line: a record exists only for a complete image.

        The record is first written beside the image (`.step_NNN.record.json`, atomically, before
        the image's atomic rename), so that a crash between the image and the manifest line loses
        nothing: the next run finds the image with its record and adopts both instead of making
        the step (and paying for it) again. The side file goes once the manifest line is written.
        Step 0 (the source, free to redo) has none.
        """
        step = record["step"]
        pending = self.run_dir / record["chain_id"] / _pending_record_name(step) if step > 0 else None
        if pending is not None:
            write_file_atomic(pending, json.dumps(record, ensure_ascii=False).encode("utf-8"))
        write_file_atomic(self.run_dir / record["image"], data)
        self._append(record, pending)

    def adopt(self, chain_id: str, step: int, parent_sha256: str | None) -> tuple[dict, bytes] | None:
        """A step whose image and record reached the disk but not the manifest (a crash): append
        the record now and return it with the image bytes; None when there is nothing to adopt."""
        pending = self.run_dir / chain_id / _pending_record_name(step)
        if not pending.is_file():
            return None
        try:
            record = json.loads(pending.read_text(encoding="utf-8"))
            data = (self.run_dir / image_rel(chain_id, step)).read_bytes()
        except (OSError, ValueError):
            return None
        ok = (
            isinstance(record, dict)
            and record.get("chain_id") == chain_id
            and record.get("step") == step
            and record.get("parent_sha256") == parent_sha256
            and record.get("sha256") == sha256_bytes(data)
        )
        if not ok:
            return None
        self._append(record, pending)
        return record, data

    def _append(self, record: dict, pending: Path | None) -> None:
        self.writer.append(record)
        if pending is not None:
            try:
                pending.unlink()
            except FileNotFoundError:
                pass
        self.on_written()

    def record_stopped(self, chain_id: str, step: int, reason: str, details) -> dict:
        """Add a chain the editor stopped to the ledger; returns its entry."""
        entry = {"event": "stopped", "chain_id": chain_id, "step": step, "reason": reason,
                 "details": details, "time": utc_now()}
        with self.lock:
            _append_line(self.run_dir / STOPPED_FILE, entry)
        return entry


def clear_stopped(run_dir: Path, chain_ids) -> None:
    """Take chains off the ledger (`--retry-stopped`): later reads no longer list them."""
    for cid in sorted(chain_ids):
        _append_line(run_dir / STOPPED_FILE, {"event": "cleared", "chain_id": cid, "time": utc_now()})


def read_stopped(run_dir) -> dict[str, dict]:
    """Chains stopped by the editor and not cleared since: chain_id -> its `stopped` entry."""
    out: dict[str, dict] = {}
    try:
        raw = (Path(run_dir) / STOPPED_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "stopped":
            out[rec["chain_id"]] = rec
        elif rec.get("event") == "cleared":
            out.pop(rec.get("chain_id"), None)
    return out


def _append_line(path: Path, record: dict) -> None:
    """Append one JSON line and fsync it (small, rare files: stopped.jsonl), taking turns with the
    other processes of a distributed run."""
    fd = open_for_append(path)
    try:
        append_locked(fd, (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
