"""The chain runner: source images x repeats -> chains of edits, written to a run folder.

A run folder (see `banana100.manifest` and the design's "Chains on disk") holds:
- `run.json`: the parameters fixed for the folder (editor, model, setting, base seed), written
  on the first run; a rerun with different ones is refused, while --steps and --repeats may grow;
- `manifest.jsonl`: one record per image, appended only after the image is fully on disk;
- `<chain_id>/step_000.png` (the source, decoded to RGB), `step_001.png`, ... one folder per
  chain, `chain_id = {source_id}__{setting}__r{repeat}`.

Chains run concurrently (`concurrency` at once, in threads); the steps of one chain run in
order, each fed the previous step's image. Every step's seed is derived from the base seed, the
chain id and the step (`step_seed`), so a chain is the same whether it ran in one go or was
interrupted and resumed. Rerunning the same command resumes every chain after its last recorded
step; an image written without its record (a crash between the two) is simply made again.
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
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from . import __version__
from .editors.base import Editor, EditRequest, EditResult
from .errors import Banana100Error, ImageReadError, ManifestError
from .imageio import IMAGE_SUFFIXES, encode_png, list_images, load_rgb
from .manifest import (
    MANIFEST_NAME,
    ManifestWriter,
    read_manifest,
    sha256_bytes,
    sha256_file,
    utc_now,
    write_file_atomic,
)
from .schema import FIELD_NAMES, RECORD_FIELDS
from .schema import chain_id as make_chain_id
from .settings import Setting, get_setting

RUN_FILE = "run.json"
LOCK_FILE = ".generate.lock"
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


class RunMismatchError(Banana100Error):
    """A rerun into a run folder made with a different editor, model, setting or seed."""


class ChainsFailedError(Banana100Error):
    """Some chains stopped on an error; the others ran to the end. `.failures`, `.summary`."""

    def __init__(self, message: str, failures: dict, summary: RunSummary):
        super().__init__(message)
        self.failures = failures  # chain_id -> (step, exception)
        self.summary = summary


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
        return "\n".join(lines)


def step_seed(base_seed: int, chain_id: str, step: int) -> int:
    """The seed of one output step: a hash of (base seed, chain id, step), in [0, 2**63)."""
    digest = hashlib.sha256(f"banana100:{int(base_seed)}:{chain_id}:{int(step)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def step_image_name(step: int) -> str:
    return f"step_{step:03d}.png"


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
    def __init__(self, editor, setting, steps, seed, run_dir, writer, bar):
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

    def _record(self, plan: _Chain, step: int, rel: str, sha: str, width: int, height: int, **extra) -> dict:
        record = {
            "chain_id": plan.chain_id,
            "source_id": plan.source.source_id,
            "setting": self.setting.name,
            "repeat": plan.repeat,
            "step": step,
            "image": rel,
            "sha256": sha,
            "parent_sha256": plan.parent_sha256,
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

    def _commit(self, plan: _Chain, step: int, data: bytes, rgb, **extra):
        """Image first (atomically), then its record: a record exists only for a complete image."""
        rel = f"{plan.chain_id}/{step_image_name(step)}"
        write_file_atomic(self.run_dir / rel, data)
        sha = sha256_bytes(data)
        self.writer.append(self._record(plan, step, rel, sha, int(rgb.shape[1]), int(rgb.shape[0]), **extra))
        plan.parent_sha256 = sha
        plan.last_image = self.run_dir / rel
        plan.next_step = step + 1
        with self.lock:
            self.written += 1
            self.bar.update(1)

    def run_chain(self, plan: _Chain) -> None:
        chain_dir = self.run_dir / plan.chain_id
        chain_dir.mkdir(parents=True, exist_ok=True)
        for stale in chain_dir.glob(".step_*.tmp-*"):  # left by a crash mid-write; the run is locked
            try:
                stale.unlink()
            except OSError:
                pass
        if plan.next_step == 0:
            if self.stop.is_set():
                return
            rgb = load_rgb(plan.source.path)
            self._commit(plan, 0, encode_png(rgb), rgb)
            current = rgb
        else:
            current = load_rgb(plan.last_image)  # verified against its sha256 while planning
        while plan.next_step <= self.steps:
            if self.stop.is_set():
                return
            k = plan.next_step
            request = EditRequest(
                image=current,
                prompt=self.setting.prompt(k),
                seed=step_seed(self.seed, plan.chain_id, k),
                config=dict(self.setting.config),
                simulate=dict(self.setting.simulate),
                step=k,
            )
            t0 = time.perf_counter()
            result = self.editor.edit(request)
            latency = time.perf_counter() - t0
            data, current = _result_image(result)
            meta = _metadata_fields(result.metadata, latency)
            self._commit(plan, k, data, current, prompt=request.prompt, seed=request.seed, **meta)

    def worker(self, jobs: queue.Queue[_Chain]) -> None:
        while not self.stop.is_set():
            try:
                plan = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                self.run_chain(plan)
            except BaseException as e:  # noqa: BLE001 - one chain's failure must not stop the others
                with self.lock:
                    self.failures[plan.chain_id] = (plan.next_step, e)


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
) -> RunSummary:
    """Make (or resume, or extend) `repeats` chains of `steps` edits per source image.

    `sources` is a folder of images (or a list of image paths); each file's stem is its
    source_id. Every source is decoded before any work starts, and an unreadable one raises
    ImageReadError naming it. `out_dir` is the run folder; rerunning the same call continues
    every chain after its last recorded step (a larger `steps` or `repeats` extends the run;
    a different editor, model, setting or seed is refused). One chain's error does not stop the
    others: at the end a ChainsFailedError lists the failed chains (their finished steps stay
    recorded; rerun to retry them). On KeyboardInterrupt the run stops scheduling steps, lets
    the steps in flight finish (a second Ctrl-C abandons them) and re-raises.
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
    srcs = _collect_sources(sources)  # before any work: nothing is written if a source is bad
    run_dir = Path(out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    params = _run_parameters(editor, setting, seed)

    with _RunLock(run_dir):
        has_manifest = (run_dir / MANIFEST_NAME).is_file()
        records = read_manifest(run_dir) if has_manifest else []
        _check_run_file(run_dir, params, bool(records), sources)
        plans = _plan_chains(run_dir, srcs, setting, params, steps, repeats, records)
        present = sum(p.present for p in plans)
        pending = [p for p in plans if p.next_step <= steps]

        bar = tqdm(
            total=len(plans) * (steps + 1),
            initial=present,
            unit="img",
            desc=f"generate {setting.name}",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
        )
        writer = ManifestWriter(run_dir)
        run = _Run(editor, setting, steps, seed, run_dir, writer, bar)
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
            bar.close()
            writer.close()

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
    )
    if run.failures:
        lines = [f"  {cid} at step {step}: {type(e).__name__}: {e}" for cid, (step, e) in sorted(run.failures.items())]
        raise ChainsFailedError(
            f"{len(run.failures)} of {len(plans)} chains failed (their finished steps are recorded; "
            "rerun the same command to retry them):\n" + "\n".join(lines) + "\n" + str(summary),
            dict(run.failures),
            summary,
        )
    return summary


def _join(threads: Iterable[threading.Thread]) -> None:
    for t in threads:
        while t.is_alive():
            t.join(0.2)
