"""The chain runner: source images x repeats -> chains of edits, written to a run folder.

A run folder (see `banana100.chains.manifest` and the design's "Chains on disk") holds:
- `run.json`: the parameters fixed for the folder (editor, model, setting, base seed), written
  on the first run; a rerun with different ones is refused, while --steps and --repeats may grow;
- `manifest.jsonl`: one record per image, appended only after the image is fully on disk;
- `<chain_id>/step_000.png` (the source, decoded to RGB), `step_001.png`, ... one folder per
  chain, `chain_id = {source_id}__{setting}__r{repeat}`.

Chains run concurrently (`concurrency` at once, in threads); the steps of one chain run in
order, each fed the previous step's image. Every step's seed is derived from the base seed, the
chain id and the step (`step_seed`), so a chain is the same whether it ran in one go or was
interrupted and resumed. Rerunning the same command resumes every chain after its last recorded
step. A step's record is also written beside its image (`.step_NNN.record.json`, before the
image's atomic rename), so a step whose image reached the disk but whose manifest line did not
(a crash between the two) is adopted on resume, not made (and paid for) again; an image with no
such record is made again. Writes are pipelined (see `_Run.run_chain`), in order per chain.
Service editors log every call in `calls.jsonl` (banana100.chains.budget); chains an editor stops
(e.g. repeated safety blocks) are listed in `stopped.jsonl`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from banana100 import __version__
from banana100.chains.budget import CALLS_FILE, CallMeter
from banana100.chains.editors.base import Editor, EditRequest, EditResult
from banana100.errors import ChainStopped, ChainsFailedError, RunMismatchError, RunStopped
from banana100.errors import Banana100Error, ImageReadError, ManifestError
from banana100.imageio import IMAGE_SUFFIXES, encode_png, list_images, load_rgb
from banana100.chains.manifest import (
    MANIFEST_NAME,
    ManifestWriter,
    read_manifest,
    sha256_bytes,
    sha256_file,
    utc_now,
    write_file_atomic,
)
from banana100.schema import FIELD_NAMES, RECORD_FIELDS
from banana100.schema import chain_id as make_chain_id
from banana100.chains.settings import Setting, get_setting

RUN_FILE = "run.json"
LOCK_FILE = ".generate.lock"
STOPPED_FILE = "stopped.jsonl"  # chains an editor stopped (ChainStopped), with the reason
RUN_FORMAT = 1
FIXED_PARAMETERS = ("editor", "model", "setting", "seed")  # may not change within a run folder

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Fields the runner fills; an editor's metadata cannot override them.
_RUNNER_FIELDS = frozenset(
    {
        "chain_id",
        "source_id",
        "setting",
        "repeat",
        "step",
        "image",
        "sha256",
        "parent_sha256",
        "prompt",
        "editor",
        "model",
        "seed",
        "width",
        "height",
        "created_at",
    }
)
_FIELD_TYPES = {"string": (str,), "int32": (int,), "int64": (int,), "float64": (int, float)}
_FIELD_DTYPE = {f.name: f.dtype for f in RECORD_FIELDS}


@dataclass
class RunSummary:
    run_dir: Path
    editor: str
    model: str
    setting: str
    steps: int  # edit steps per chain (images per chain: steps + 1)
    chains: int
    written: int  # images (records) written by this run
    already_present: int  # images (records) found from earlier runs, within steps 0..steps
    chains_complete: int
    chains_failed: int
    wall_s: float
    chains_stopped: int = 0  # stopped by the editor (see stopped.jsonl); not retried on rerun
    cost_usd: float | None = None  # estimated spend of the run folder, earlier runs included
    cost_this_run_usd: float | None = None
    stop_reason: str | None = None  # why the run stopped early (cost cap, bad key, ...)

    def __str__(self) -> str:
        lines = [
            f"run folder: {self.run_dir}",
            f"  editor {self.editor} ({self.model}), setting {self.setting}, steps 0-{self.steps}",
            f"  chains: {self.chains} ({self.chains_complete} complete"
            + (f", {self.chains_failed} failed" if self.chains_failed else "")
            + ")",
            f"  images written this run: {self.written}; already present: {self.already_present}",
            f"  wall time: {self.wall_s:.1f} s",
        ]
        if self.chains_stopped:
            lines.insert(3, f"  chains stopped by the editor: {self.chains_stopped} (reasons in {STOPPED_FILE})")
        if self.cost_usd is not None:
            lines.append(
                f"  estimated cost: ${self.cost_this_run_usd or 0:.2f} this run, ${self.cost_usd:.2f} in this folder "
                f"(calls in {CALLS_FILE}; prices in generation/pricing.yaml)"
            )
        if self.stop_reason:
            lines.append(f"  stopped early: {self.stop_reason}")
        return "\n".join(lines)


def step_seed(base_seed: int, chain_id: str, step: int) -> int:
    """The seed of one output step: a hash of (base seed, chain id, step), in [0, 2**63)."""
    digest = hashlib.sha256(f"banana100:{int(base_seed)}:{chain_id}:{int(step)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def step_image_name(step: int) -> str:
    return f"step_{step:03d}.png"


def pending_record_name(step: int) -> str:
    """The record written next to an image before the image itself (see `_Run._commit`)."""
    return f".step_{step:03d}.record.json"


def chain_seed(setting: Setting, base_seed: int, chain_id: str, step: int) -> int:
    """The seed of output step `step` under the setting's seed policy (`fixed`: step 1's seed)."""
    return step_seed(base_seed, chain_id, 1 if setting.seed_policy == "fixed" else step)


# -- planning -------------------------------------------------------------------------------


@dataclass
class _Source:
    source_id: str
    path: Path


@dataclass
class _Chain:
    chain_id: str
    source: _Source
    repeat: int
    next_step: int  # first step still to make
    parent_sha256: str | None  # sha256 of step next_step - 1
    last_image: Path | None  # image of step next_step - 1 (None when next_step == 0)
    present: int  # records already there, within 0..steps


def _check_count(label: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise Banana100Error(f"{label} must be a whole number >= {minimum}, got {value!r}")
    return value


def _collect_sources(sources) -> list[_Source]:
    """List, check and decode every source image before any work starts."""
    if isinstance(sources, (str, os.PathLike)):
        folder = Path(sources)
        if not folder.is_dir():
            raise ImageReadError(f"{folder}: no such folder (sources must be a folder of images)")
        paths = [p for p in list_images(folder) if not p.name.startswith(".")]
        if not paths:
            raise ImageReadError(f"{folder}: no source images found (looked for {', '.join(IMAGE_SUFFIXES)})")
    else:
        paths = [Path(p) for p in sources]
        if not paths:
            raise ImageReadError("no source images given")
    by_stem: dict[str, list[Path]] = {}
    for p in paths:
        by_stem.setdefault(p.stem, []).append(p)
    duplicates = {stem: ps for stem, ps in by_stem.items() if len(ps) > 1}
    if duplicates:
        listing = "; ".join(f"{stem!r}: {', '.join(str(p) for p in ps)}" for stem, ps in sorted(duplicates.items()))
        raise Banana100Error(
            f"source images must have distinct file names without their extension (the name is the "
            f"source_id): {listing}. Rename or remove one of each."
        )
    problems = []
    for p in paths:
        try:
            load_rgb(p)
        except ImageReadError as e:
            problems.append(str(e))
    if problems:
        raise ImageReadError(
            "cannot read source image"
            + ("s" if len(problems) > 1 else "")
            + ": "
            + "; ".join(problems)
            + " (nothing was generated)"
        )
    return [_Source(p.stem, p) for p in paths]


def _run_parameters(editor: Editor, setting: Setting, seed: int) -> dict:
    return {"editor": editor.name, "model": editor.model, "setting": setting.name, "seed": int(seed)}


def _check_run_file(run_dir: Path, params: dict, has_records: bool, sources) -> None:
    """Write run.json on the first run; refuse a rerun with different fixed parameters."""
    path = run_dir / RUN_FILE
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
        write_file_atomic(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, dict):
            raise TypeError("not a JSON object")
    except (OSError, ValueError, TypeError) as e:
        raise ManifestError(f"{path}: cannot read the run parameters ({e})") from None
    diffs = [k for k in FIXED_PARAMETERS if stored.get(k) != params[k]]
    if diffs:
        was = ", ".join(f"{k}={stored.get(k)!r}" for k in FIXED_PARAMETERS)
        now = ", ".join(f"{k}={params[k]!r}" for k in FIXED_PARAMETERS)
        raise RunMismatchError(
            f"{run_dir} was made with {was}; this command asks for {now} (different {', '.join(diffs)}). "
            "A run folder holds one editor, model, setting and seed (only --steps and --repeats may grow): "
            "use another --out folder."
        )


def _plan_chains(
    run_dir: Path, sources: list[_Source], setting: Setting, params: dict, steps: int, repeats: int, records: list[dict]
) -> list[_Chain]:
    manifest = run_dir / MANIFEST_NAME
    by_chain: dict[str, list[dict]] = {}
    for r in records:
        by_chain.setdefault(r["chain_id"], []).append(r)
    plans = []
    for src in sources:
        for rep in range(repeats):
            cid = make_chain_id(src.source_id, setting.name, rep)
            recs = sorted(by_chain.get(cid, []), key=lambda r: r["step"])
            found = [r["step"] for r in recs]
            if found != list(range(len(recs))):
                raise ManifestError(
                    f"{manifest}: chain {cid!r} has steps {_ranges(found)}, not a contiguous run from 0; "
                    "the manifest was edited by hand or merged from elsewhere"
                )
            for r in recs:
                for key, want in (
                    ("source_id", src.source_id),
                    ("repeat", rep),
                    ("setting", setting.name),
                    ("editor", params["editor"]),
                    ("model", params["model"]),
                ):
                    if r[key] != want:
                        raise ManifestError(
                            f"{manifest}: chain {cid!r} step {r['step']} has {key}={r[key]!r}, expected {want!r}"
                        )
            n = len(recs)
            plan = _Chain(cid, src, rep, n, None, None, min(n, steps + 1))
            if n:
                last = recs[-1]
                plan.parent_sha256 = last["sha256"]
                plan.last_image = run_dir / last["image"]
                if n <= steps:  # the chain continues: its last image must be intact
                    _verify_image(plan.last_image, last, manifest)
            plans.append(plan)
    return plans


def _verify_image(path: Path, record: dict, manifest: Path) -> None:
    where = f"chain {record['chain_id']!r} step {record['step']} in {manifest}"
    if not path.is_file():
        raise ManifestError(
            f"{path}: recorded ({where}) but missing on disk, so the chain cannot continue from it; "
            "restore the file, or start the run again in a new --out folder"
        )
    if sha256_file(path) != record["sha256"]:
        raise ManifestError(
            f"{path}: its bytes do not match the sha256 recorded ({where}); the file was changed after "
            "it was written, so the chain cannot continue from it"
        )


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    out, start, prev = [], steps[0], steps[0]
    for s in steps[1:] + [None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)


class _RunLock:
    """An exclusive lock on a run folder, so that two runs never append to one manifest."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK_FILE
        self._fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return self
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise Banana100Error(
                f"{self.path.parent} is in use by another `banana100 generate`; wait for it to finish "
                "(or stop it) before running into the same folder"
            ) from None
        return self

    def __exit__(self, *exc):
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None


# -- running ------------------------------------------------------------------------------


def _plain(value):
    """numpy scalars -> Python scalars, so that records are JSON and pass validation."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        try:
            return value.item()
        except (TypeError, ValueError):
            return value
    return value


def _metadata_fields(metadata: dict | None, measured_latency: float) -> dict:
    """Editor metadata -> manifest fields; anything not a schema field goes into editor_info."""
    fields, extra = {}, {}
    for key, value in (metadata or {}).items():
        value = _plain(value)
        dtype = _FIELD_DTYPE.get(key)
        if dtype == "string" and isinstance(value, (dict, list, tuple)):
            value = json.dumps(value, sort_keys=True, default=str)
        ok_type = value is None or (
            dtype is not None and not isinstance(value, bool) and isinstance(value, _FIELD_TYPES[dtype])
        )
        if key in _RUNNER_FIELDS or dtype is None or not ok_type:
            extra[key] = value
        elif value is not None:
            if dtype == "float64" and isinstance(value, float) and not math.isfinite(value):
                extra[key] = repr(value)
                continue
            fields[key] = value
    if extra:
        info = fields.get("editor_info")
        try:
            merged = json.loads(info) if info else {}
        except ValueError:
            merged = None
        if not isinstance(merged, dict):
            merged = {"editor_info": info}
        merged.update(
            {k: (v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)) for k, v in extra.items()}
        )
        fields["editor_info"] = json.dumps(merged, sort_keys=True, default=str)
    fields.setdefault("latency_s", round(measured_latency, 6))
    return fields


def _result_image(result: EditResult) -> tuple[bytes, object]:
    """(PNG bytes to store, RGB array the next step sees = the stored image decoded)."""
    raw = result.image_bytes
    if raw is not None and bytes(raw[:8]) == _PNG_SIGNATURE:
        data = bytes(raw)
        if isinstance(result.image, np.ndarray) and result.image.ndim == 3 and result.image.dtype == np.uint8:
            return data, result.image  # the editor decoded exactly these bytes already
        return data, load_rgb(data)
    if result.image is not None:
        rgb = load_rgb(result.image)
    elif raw is not None:
        rgb = load_rgb(bytes(raw))
    else:
        reason = (result.metadata or {}).get("finish_reason")
        raise Banana100Error(f"the editor returned no image (finish_reason={reason!r})")
    return encode_png(rgb), rgb


class _Run:
    def __init__(self, editor, setting, steps, seed, run_dir, writer, bar, meter=None, writers=None):
        self.meter = meter
        self.writers = writers  # a thread pool for the pipelined writes (see run_chain)
        self.stopped: dict[str, dict] = {}  # chain_id -> stop record, this run
        self.stop_reason: str | None = None
        self.stop_error: RunStopped | None = None
        self.editor = editor
        self.setting = setting
        self.steps = steps
        self.seed = seed
        self.run_dir = run_dir
        self.writer = writer
        self.bar = bar
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.written = 0
        self.failures: dict[str, tuple[int, BaseException]] = {}

    def _record(self, plan: _Chain, step: int, rel: str, sha: str, width: int, height: int, parent=None, **extra) -> dict:
        record = {
            "chain_id": plan.chain_id,
            "source_id": plan.source.source_id,
            "setting": self.setting.name,
            "repeat": plan.repeat,
            "step": step,
            "image": rel,
            "sha256": sha,
            "parent_sha256": parent,
            "prompt": extra.pop("prompt", None),
            "editor": self.editor.name,
            "model": self.editor.model,
            "seed": extra.pop("seed", None),
            "width": width,
            "height": height,
            **extra,
            "created_at": utc_now(),
        }
        always = ("parent_sha256", "prompt", "seed")  # explicit nulls at step 0
        return {k: record[k] for k in FIELD_NAMES if record.get(k) is not None or k in always}

    def _write(self, plan: _Chain, step: int, data: bytes, record: dict) -> None:
        """Side record, then the image, then the manifest line: a record exists only for a complete image.

        The record is first written beside the image (`.step_NNN.record.json`, atomically, before
        the image's atomic rename), so that a crash between the image and the manifest line loses
        nothing: the next run finds the image with its record and adopts both instead of making
        the step (and paying for it) again. The side file goes once the manifest line is written.
        Step 0 (the source, free to redo) has none.
        """
        pending = self.run_dir / plan.chain_id / pending_record_name(step) if step > 0 else None
        if pending is not None:
            write_file_atomic(pending, json.dumps(record, ensure_ascii=False).encode("utf-8"))
        write_file_atomic(self.run_dir / record["image"], data)
        self._append(plan, step, record, pending)

    def _commit(self, plan: _Chain, step: int, data: bytes, rgb, **extra):
        """Record the image `data` of `step` and write both (see `_write`)."""
        rel = f"{plan.chain_id}/{step_image_name(step)}"
        record = self._record(
            plan, step, rel, sha256_bytes(data), int(rgb.shape[1]), int(rgb.shape[0]), parent=plan.parent_sha256, **extra
        )
        self._write(plan, step, data, record)

    def _append(self, plan: _Chain, step: int, record: dict, pending: Path | None) -> None:
        self.writer.append(record)
        if pending is not None:
            try:
                pending.unlink()
            except FileNotFoundError:
                pass
        sha, rel = record["sha256"], record["image"]
        plan.parent_sha256 = sha
        plan.last_image = self.run_dir / rel
        plan.next_step = step + 1
        with self.lock:
            self.written += 1
            self.bar.update(1)

    def _adopt(self, plan: _Chain, step: int) -> bytes | None:
        """A step whose image and record reached the disk but not the manifest (a crash):
        append the record now and return the image bytes; None when there is nothing to adopt."""
        pending = self.run_dir / plan.chain_id / pending_record_name(step)
        if not pending.is_file():
            return None
        image = self.run_dir / plan.chain_id / step_image_name(step)
        try:
            record = json.loads(pending.read_text(encoding="utf-8"))
            data = image.read_bytes()
        except (OSError, ValueError):
            return None
        ok = (
            isinstance(record, dict)
            and record.get("chain_id") == plan.chain_id
            and record.get("step") == step
            and record.get("parent_sha256") == plan.parent_sha256
            and record.get("sha256") == sha256_bytes(data)
        )
        if not ok:
            return None
        self._append(plan, step, record, pending)
        return data

    def run_chain(self, plan: _Chain) -> None:
        """Make the chain's missing steps, in order.

        Writing is pipelined: as soon as step k's answer is in memory (and validated by the
        editor) the call for step k+1 starts, while a background writer puts step k on disk
        (image, fsync, rename, then its manifest line). The writes of one chain stay in order
        (step k+1 is written only after step k's record is in the manifest), so a crash at any
        moment leaves a contiguous chain; a step whose write had not finished is simply made
        again, since its result never reached the disk.
        """
        chain_dir = self.run_dir / plan.chain_id
        chain_dir.mkdir(parents=True, exist_ok=True)
        for stale in chain_dir.glob("*.step_*.tmp-*"):  # images and records a crash left mid-write; the run is locked
            try:
                stale.unlink()
            except OSError:
                pass
        for old in chain_dir.glob(".step_*.record.json"):  # records of steps already in the manifest
            try:
                if int(old.name[6:9]) < plan.next_step:
                    old.unlink()
            except (OSError, ValueError):
                pass
        if plan.next_step == 0:
            if self.stop.is_set():
                return
            rgb = load_rgb(plan.source.path)
            current_bytes = encode_png(rgb)
            self._commit(plan, 0, current_bytes, rgb)
            current = rgb
        else:
            current_bytes = plan.last_image.read_bytes()  # verified against its sha256 while planning
            current = load_rgb(current_bytes)
        while plan.next_step <= self.steps:  # a step on disk whose record missed the manifest
            adopted = self._adopt(plan, plan.next_step)
            if adopted is None:
                break
            current_bytes, current = adopted, load_rgb(adopted)
        k, parent = plan.next_step, plan.parent_sha256
        writing = None  # the future of the step being written
        try:
            while k <= self.steps:
                if self.stop.is_set():
                    return
                request = EditRequest(
                    image=current,
                    prompt=self.setting.prompt(k),
                    seed=chain_seed(self.setting, self.seed, plan.chain_id, k),
                    config=dict(self.setting.config),
                    simulate=self.setting.simulate_for(k),
                    step=k,
                    image_bytes=current_bytes,
                    chain_id=plan.chain_id,
                    meter=self.meter,
                )
                t0 = time.perf_counter()
                result = self.editor.edit(request)
                latency = time.perf_counter() - t0
                data, current = _result_image(result)
                current_bytes = data
                meta = _metadata_fields(result.metadata, latency)
                seed = result.seed if isinstance(result.seed, int) and not isinstance(result.seed, bool) else request.seed
                rel = f"{plan.chain_id}/{step_image_name(k)}"
                record = self._record(
                    plan, k, rel, sha256_bytes(data), int(current.shape[1]), int(current.shape[0]),
                    parent=parent, prompt=request.prompt, seed=seed, **meta,
                )
                if writing is not None:
                    writing.result()  # step k-1 is in the manifest before step k is written
                writing = self.writers.submit(self._write, plan, k, data, record)
                parent = record["sha256"]
                k += 1
        finally:
            if writing is not None:
                writing.result()

    def worker(self, jobs: queue.Queue[_Chain]) -> None:
        while not self.stop.is_set():
            try:
                plan = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                self.run_chain(plan)
            except ChainStopped as e:  # this chain cannot go on; the others carry on
                entry = {
                    "event": "stopped",
                    "chain_id": plan.chain_id,
                    "step": plan.next_step,
                    "reason": str(e),
                    "details": e.details,
                    "time": utc_now(),
                }
                with self.lock:
                    self.stopped[plan.chain_id] = entry
                    _append_line(self.run_dir / STOPPED_FILE, entry)
            except RunStopped as e:  # no chain can go on: stop scheduling, let the others finish
                with self.lock:
                    if self.stop_error is None:
                        self.stop_error = e
                        self.stop_reason = str(e)
                self.stop.set()
            except BaseException as e:  # noqa: BLE001 - one chain's failure must not stop the others
                with self.lock:
                    self.failures[plan.chain_id] = (plan.next_step, e)


def _append_line(path: Path, record: dict) -> None:
    """Append one JSON line and fsync it (small, rare files: stopped.jsonl)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


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


def _dry_run_text(editor, setting, params, plans, pending, steps, seed, run_dir, stopped, max_cost) -> str:
    calls = sum(steps + 1 - max(p.next_step, 1) for p in pending)
    lines = [
        f"dry run: nothing is called and nothing is written ({run_dir})",
        f"  editor {editor.name} ({editor.model}), setting {setting.name}: {setting.description}",
        f"  chains: {len(plans)} ({len(plans) - len(pending) - len(stopped)} complete, {len(pending)} to run"
        + (f", {len(stopped)} stopped by the editor and skipped" if stopped else "")
        + f"); steps to make: {calls} (one call each when nothing fails)",
    ]
    est = editor.estimate_usd(dict(setting.config))
    if est is not None:
        typical, reserve = est
        lines.append(
            f"  estimated cost: ${typical:.4f} a step, ${typical * calls:.2f} for this run "
            f"(${typical * 100:.2f} per 100 steps; up to ${reserve:.4f} reserved per call under --max-cost)"
        )
        if max_cost is not None and typical * calls > max_cost:
            lines.append(f"  --max-cost ${max_cost:.2f} will stop the run after about {int(max_cost / typical)} steps")
    elif editor.price is None:
        lines.append(f"  estimated cost: unknown (no prices for {editor.model!r} in generation/pricing.yaml)")
    lines.append("  prompt schedule and config (first steps of the first chain):")
    cid = plans[0].chain_id if plans else "?"
    for k in range(1, min(steps, max(len(setting.prompts), 2)) + 1):
        s = chain_seed(setting, seed, cid, k)
        cfg = editor.request_config(dict(setting.config), s % 2**31)
        lines.append(f"    step {k}: {setting.prompt(k)!r}")
        lines.append(f"      config: {json.dumps(cfg, sort_keys=True)}")
    return "\n".join(lines)


def generate_chains(
    editor: Editor,
    sources,
    setting: str | Setting,
    steps: int,
    repeats: int,
    out_dir,
    concurrency: int = 4,
    seed: int = 0,
    progress: bool = True,
    max_cost: float | None = None,
    rpm: float | None = None,
    dry_run: bool = False,
    retry_stopped: bool = False,
) -> RunSummary | str:
    """Make (or resume, or extend) `repeats` chains of `steps` edits per source image.

    `sources` is a folder of images (or a list of image paths); each file's stem is its
    source_id. Every source is decoded before any work starts, and an unreadable one raises
    ImageReadError naming it. `out_dir` is the run folder; rerunning the same call continues
    every chain after its last recorded step (a larger `steps` or `repeats` extends the run;
    a different editor, model, setting or seed is refused). One chain's error does not stop the
    others: at the end a ChainsFailedError lists the failed chains (their finished steps stay
    recorded; rerun to retry them). On KeyboardInterrupt the run stops scheduling steps, lets
    the steps in flight finish (a second Ctrl-C abandons them) and re-raises.

    Paid editors: every service call is logged in `calls.jsonl` (see banana100.chains.budget);
    `max_cost` (USD, for the whole run folder, earlier runs included) stops the run cleanly
    before a call could take the estimated spend past it, raising BudgetExceeded with the
    summary; `rpm` caps requests per minute across all chains. A chain the editor stops
    (ChainStopped, e.g. repeated safety blocks) is recorded in `stopped.jsonl` and skipped by
    later runs unless `retry_stopped`. `dry_run` returns a description of what would be done
    (chains, steps, estimated cost, prompt schedule, config) and touches nothing.
    """
    t_start = time.monotonic()
    if not isinstance(editor, Editor):
        raise Banana100Error(f"editor must be a banana100 Editor, got {type(editor).__name__}")
    setting = setting if isinstance(setting, Setting) else get_setting(setting)
    steps = _check_count("steps", steps, 0)
    repeats = _check_count("repeats", repeats, 1)
    concurrency = _check_count("concurrency", concurrency, 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise Banana100Error(f"seed must be a whole number, got {seed!r}")
    if max_cost is not None and not (isinstance(max_cost, (int, float)) and max_cost >= 0):
        raise Banana100Error(f"max_cost must be a number of USD >= 0, got {max_cost!r}")
    if rpm is not None and not (isinstance(rpm, (int, float)) and rpm > 0):
        raise Banana100Error(f"the rate limit must be > 0 requests per minute, got {rpm!r}")
    editor.check_config(dict(setting.config))
    if max_cost is not None and editor.price is None:
        raise Banana100Error(
            f"--max-cost needs prices for {editor.model!r}, and generation/pricing.yaml has none; add them there"
        )
    srcs = _collect_sources(sources)  # before any work: nothing is written if a source is bad
    run_dir = Path(out_dir)
    params = _run_parameters(editor, setting, seed)

    if dry_run:
        has_manifest = (run_dir / MANIFEST_NAME).is_file()
        records = read_manifest(run_dir) if has_manifest else []
        plans = _plan_chains(run_dir, srcs, setting, params, steps, repeats, records)
        stopped = {} if retry_stopped else read_stopped(run_dir)
        pending = [p for p in plans if p.next_step <= steps and p.chain_id not in stopped]
        return _dry_run_text(editor, setting, params, plans, pending, steps, seed, run_dir, stopped, max_cost)

    editor.connect()  # a missing key fails here, before anything is written
    run_dir.mkdir(parents=True, exist_ok=True)

    with _RunLock(run_dir):
        has_manifest = (run_dir / MANIFEST_NAME).is_file()
        records = read_manifest(run_dir) if has_manifest else []
        _check_run_file(run_dir, params, bool(records), sources)
        plans = _plan_chains(run_dir, srcs, setting, params, steps, repeats, records)
        present = sum(p.present for p in plans)
        stopped_before = read_stopped(run_dir)
        if retry_stopped and stopped_before:
            for cid in sorted(stopped_before):
                _append_line(run_dir / STOPPED_FILE, {"event": "cleared", "chain_id": cid, "time": utc_now()})
            stopped_before = {}
        pending = [p for p in plans if p.next_step <= steps and p.chain_id not in stopped_before]

        bar = tqdm(
            total=len(plans) * (steps + 1),
            initial=present,
            unit="img",
            desc=f"generate {setting.name}",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        )
        paid = editor.estimate_usd(dict(setting.config)) is not None  # prices known: a running cost estimate

        def show_cost(m: CallMeter) -> None:
            if paid:
                cap = f"/{m.max_cost:.2f}" if m.max_cost is not None else ""
                bar.set_postfix_str(f"${m.spent:.2f}{cap}", refresh=False)

        meter = CallMeter(run_dir / CALLS_FILE if editor.metered else None, max_cost=max_cost, rpm=rpm, on_change=show_cost)
        if paid:
            show_cost(meter)
        writer = ManifestWriter(run_dir)
        writers = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(pending))), thread_name_prefix="banana100-write")
        run = _Run(editor, setting, steps, seed, run_dir, writer, bar, meter, writers)
        try:
            jobs: queue.Queue[_Chain] = queue.Queue()
            for p in pending:
                jobs.put(p)
            threads = [
                threading.Thread(target=run.worker, args=(jobs,), name=f"banana100-chain-{i}", daemon=True)
                for i in range(min(concurrency, len(pending)))
            ]
            for t in threads:
                t.start()
            try:
                _join(threads)
            except KeyboardInterrupt:
                run.stop.set()
                print(
                    "\ninterrupted: finishing the steps in flight (press Ctrl-C again to abandon them)",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    _join(threads)
                except KeyboardInterrupt:
                    pass  # abandon: daemon threads die with the process; files stay consistent
                raise
        finally:
            writers.shutdown(wait=True)
            bar.close()
            writer.close()
            meter.close()

    summary = RunSummary(
        run_dir=run_dir,
        editor=editor.name,
        model=editor.model,
        setting=setting.name,
        steps=steps,
        chains=len(plans),
        written=run.written,
        already_present=present,
        chains_complete=sum(1 for p in plans if p.next_step > steps),
        chains_failed=len(run.failures),
        wall_s=time.monotonic() - t_start,
        chains_stopped=len(stopped_before) + len(run.stopped),
        cost_usd=meter.spent if paid else None,
        cost_this_run_usd=(meter.spent - meter.spent_before) if paid else None,
        stop_reason=run.stop_reason,
    )
    if run.failures:
        lines = [f"  {cid} at step {step}: {type(e).__name__}: {e}" for cid, (step, e) in sorted(run.failures.items())]
        raise ChainsFailedError(
            f"{len(run.failures)} of {len(plans)} chains failed (their finished steps are recorded; "
            "rerun the same command to retry them):\n" + "\n".join(lines) + "\n" + str(summary),
            dict(run.failures),
            summary,
        )
    if run.stop_error is not None:
        err = type(run.stop_error)(f"{run.stop_error}\n{summary}")
        err.summary = summary
        raise err
    return summary


def _join(threads: Iterable[threading.Thread]) -> None:
    for t in threads:
        while t.is_alive():
            t.join(0.2)
