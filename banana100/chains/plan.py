"""Planning a run: check the arguments and sources, find what each chain still needs, and say
what a run would do (`--dry-run`) without doing it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from banana100.chains.chat import check_turns
from banana100.chains.editors.base import Editor
from banana100.chains.manifest import MANIFEST_NAME, sha256_file
from banana100.chains.settings import Setting
from banana100.chains.step import chain_seed
from banana100.errors import Banana100Error, ImageReadError, ManifestError
from banana100.imageio import IMAGE_SUFFIXES, list_images, load_rgb
from banana100.schema import CHAT_MODES, chat_mode_of
from banana100.schema import chain_id as make_chain_id


@dataclass
class Source:
    source_id: str
    path: Path


@dataclass
class ChainPlan:
    chain_id: str
    source: Source
    repeat: int
    next_step: int  # first step still to make
    parent_sha256: str | None  # sha256 of step next_step - 1
    last_image: Path | None  # image of step next_step - 1 (None when next_step == 0)
    present: int  # records already there, within 0..steps
    chat_mode: str = "different"  # banana100.schema.CHAT_MODES; "same": one conversation (chains.chat)
    records: list = field(default_factory=list)  # same-chat: the stored steps, to replay the conversation

    def advance(self, run_dir: Path, record: dict) -> None:
        """Step `record["step"]` is recorded: the chain continues after it."""
        self.parent_sha256 = record["sha256"]
        self.last_image = run_dir / record["image"]
        self.next_step = record["step"] + 1
        if self.chat_mode == "same":
            self.records.append(record)


def _check_count(label: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise Banana100Error(f"{label} must be a whole number >= {minimum}, got {value!r}")


def check_chat_modes(editor, chat) -> tuple[str, ...]:
    """`chat` ("different", "same", "different,same" or a list) -> the run's chat modes, refused
    with one line when unknown or when the editor cannot hold a conversation."""
    modes = chat.split(",") if isinstance(chat, str) else list(chat)
    modes = tuple(dict.fromkeys(m.strip() for m in modes if m.strip()))
    bad = [m for m in modes if m not in CHAT_MODES]
    if not modes or bad:
        raise Banana100Error(f"--chat {','.join(bad) or chat!r}: expected {' or '.join(CHAT_MODES)} (or both, comma-separated)")
    if "same" in modes and not getattr(editor, "supports_chat", False):
        raise Banana100Error(
            f"--chat same: the {editor.name} editor ({editor.model}) cannot hold a conversation; "
            "same-chat chains need an editor that can (gemini)"
        )
    return modes


def check_arguments(editor, setting: Setting, steps, repeats, concurrency, seed, max_cost, rpm) -> None:
    """Refuse bad arguments of `generate_chains` (and a config the editor cannot honour) before
    anything is read or written."""
    if not isinstance(editor, Editor):
        raise Banana100Error(f"editor must be a banana100 Editor, got {type(editor).__name__}")
    _check_count("steps", steps, 0)
    _check_count("repeats", repeats, 1)
    _check_count("concurrency", concurrency, 1)
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


def collect_sources(sources) -> list[Source]:
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
    return [Source(p.stem, p) for p in paths]


def plan_chains(
    run_dir: Path, sources: list[Source], setting: Setting, params: dict, steps: int, repeats: int, records: list[dict],
    chat_modes: tuple[str, ...] = ("different",),
) -> list[ChainPlan]:
    """Every chain of the run, with the step it continues from (checked against the manifest)."""
    manifest = run_dir / MANIFEST_NAME
    by_chain: dict[str, list[dict]] = {}
    for r in records:
        by_chain.setdefault(r["chain_id"], []).append(r)
    plans = []
    for src, mode, rep in ((s, m, r) for s in sources for m in chat_modes for r in range(repeats)):  # one chain each
        cid = make_chain_id(src.source_id, setting.name, rep, chat_mode=mode)
        recs = sorted(by_chain.get(cid, []), key=lambda r: r["step"])
        found = [r["step"] for r in recs]
        if found != list(range(len(recs))):
            raise ManifestError(
                f"{manifest}: chain {cid!r} has steps {step_ranges(found)}, not a contiguous run from 0; "
                "the manifest was edited by hand or merged from elsewhere"
            )
        for r in recs:
            for key, want in (
                ("source_id", src.source_id),
                ("repeat", rep),
                ("setting", setting.name),
                ("editor", params["editor"]),
                ("model", params["model"]),
                ("chat_mode", mode),
            ):
                have = chat_mode_of(r) if key == "chat_mode" else r.get(key)
                if have != want:
                    raise ManifestError(
                        f"{manifest}: chain {cid!r} step {r['step']} has {key}={have!r}, expected {want!r}"
                    )
        n = len(recs)
        plan = ChainPlan(cid, src, rep, n, None, None, min(n, steps + 1), mode, recs if mode == "same" else [])
        if n:
            last = recs[-1]
            plan.parent_sha256 = last["sha256"]
            plan.last_image = run_dir / last["image"]
            if n <= steps:  # the chain continues: what it is fed must be intact, before anything is sent
                check_continuable(run_dir, recs, mode, manifest)
        plans.append(plan)
    return plans


def check_continuable(run_dir: Path, recs: list[dict], mode: str, manifest: Path) -> None:
    """A chain about to go on (records sorted by step): its source (step 0) and its last image as
    recorded, and in same-chat mode every image and turn file the conversation replays; the first
    one replaced or missing is refused, naming its file."""
    images = recs if mode == "same" else [recs[0], recs[-1]] if len(recs) > 1 else recs
    for rec in images:
        _verify_image(run_dir / rec["image"], rec, manifest)
    if mode == "same":
        check_turns(run_dir, recs)


def _verify_image(path: Path, record: dict, manifest: Path) -> None:
    where = f"chain {record['chain_id']!r} step {record['step']} in {manifest}"
    if not path.is_file():
        raise ManifestError(
            f"{path}: recorded ({where}) but missing on disk, so the chain cannot continue from it; "
            "restore the file, or start the run again in a new --out folder"
        )
    if sha256_file(path) != record["sha256"]:
        what = "the chain's source" if record["step"] == 0 else "a step the chain goes on from"
        raise ManifestError(
            f"{path}: its bytes do not match the sha256 recorded ({where}); the file was changed after "
            f"it was written, and it is {what}, so the chain cannot continue (nothing was sent). Restore the "
            "file, or start the chain again in a new --out folder"
        )


def step_ranges(steps: list[int]) -> str:
    """Sorted steps as ranges for messages: [0, 1, 2, 5] -> '0-2, 5'."""
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


def _step_usd(editor: Editor, setting: Setting, chat_mode: str, step: int) -> float:
    """Typical USD of output step `step`: a same-chat step k resends the source and k-1 answers."""
    history = step - 1 if chat_mode == "same" else 0
    return editor.estimate_usd(dict(setting.config), history_images=history)[0]


def dry_run_text(
    editor: Editor, setting: Setting, plans: list[ChainPlan], pending: list[ChainPlan], steps: int, seed: int,
    run_dir: Path, stopped: dict, max_cost: float | None,
) -> str:
    """What a run would do: chains, steps to make, estimated cost, prompt schedule and config."""
    calls = sum(steps + 1 - max(p.next_step, 1) for p in pending)
    lines = [
        f"dry run: nothing is called and nothing is written ({run_dir})",
        f"  editor {editor.name} ({editor.model}), setting {setting.name}: {setting.description}",
        f"  chains: {len(plans)} ({len(plans) - len(pending) - len(stopped)} complete, {len(pending)} to run"
        + (f", {len(stopped)} stopped by the editor and skipped" if stopped else "")
        + f"); steps to make: {calls} (one call each when nothing fails)",
        f"  chat: {', '.join(dict.fromkeys(p.chat_mode for p in plans)) or 'different'}"
        " (different: a fresh request each step; same: one conversation per chain)",
    ]
    est = editor.estimate_usd(dict(setting.config))
    if est is not None:
        typical, reserve = est
        # step-major order, as concurrent chains advance together
        costs = [_step_usd(editor, setting, p.chat_mode, k) for k in range(1, steps + 1)
                 for p in pending if k >= p.next_step]
        total = sum(costs)
        lines.append(
            f"  estimated cost: ${typical:.4f} a step, ${total:.2f} for this run "
            f"(${typical * 100:.2f} per 100 steps; up to ${reserve:.4f} reserved per call under --max-cost)"
        )
        if any(p.chat_mode == "same" for p in plans):
            grow = _step_usd(editor, setting, "same", 2) - _step_usd(editor, setting, "same", 1)
            lines.append(
                f"  same-chat chains resend the conversation: each step costs at least ${grow:.4f} more than "
                f"the one before (one more image in the history), so step {steps} costs at least "
                f"${_step_usd(editor, setting, 'same', steps):.4f}" + (getattr(editor, "chat_cost_note", "") or "")
            )
        if max_cost is not None and total > max_cost:
            spent, n = 0.0, 0
            while n < len(costs) and spent + costs[n] <= max_cost:
                spent, n = spent + costs[n], n + 1
            lines.append(f"  --max-cost ${max_cost:.2f} will stop the run after about {n} steps")
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
