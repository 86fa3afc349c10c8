"""`banana100 import-chains FOLDER --pattern ... --out RUN_DIR`: a folder of chain images -> a run folder.

Turns an existing folder of chain images (a downloaded copy of the original Banana100 release,
chains made by another tool) into a run folder with a proper `manifest.jsonl`, so that it can be
verified, built into a dataset, scored and compared with new runs like any other run.

The pattern says how a file's path (relative to FOLDER, with `/`) names its chain and step:

- a template, `{field}` for a path part and `{field:03d}` (or `{field:d}`) for a number:
      {chain}/step_{step:03d}.png
      {setting}/{source}_r{repeat}/{step}.png
      {source}/{setting}/repeat_{repeat}/iter_{step}.png
  `*` matches any run of characters within one path part, `**/` any number of folders.
- or a regular expression with named groups, prefixed with `re:`:
      re:(?P<chain>[^/]+)/(?P<step>\\d+)\\.png

Fields: `step` (required: 0 = the source image), then any of `chain` (a chain name),
`source` (the source image id), `setting`, `repeat`, `model`, `chat` (the chat mode: a path part
such as `same`, `same_chat`, `different`, `diff-chat`, `new_chat`) and `variant` (a free label
that tells apart sequences of one source and setting, e.g. the editor family of the release's
`more_models` supplement). A chain is one distinct (chain or source, setting, repeat, model, chat,
variant) combination. Missing fields come from the options: `setting` (default `replicate`),
`repeat` (default 0), `model`, `chat_mode` (default none: the paper's different chat), `variant`;
`source` defaults to the `chain` field. The chain id is the toolkit's (`schema.chain_id`):
`{source}__{setting}[__{variant}][__same-chat]__r{repeat}`. Files that do not match are ignored
(and counted). Every matched file is decoded in full (a truncated image is refused). Steps may
differ in size from each other and from the source: each record has its own width and height.

Images are copied (or hard-linked, `link=True`) to `<chain_id>/step_NNN.<ext>`; each record
gets the file's SHA-256, its parent's (the previous step's) SHA-256, its size, the prompt of
the setting (from `generation/settings.yaml` when the setting is known there) and
`editor="imported"`. A chain with a gap in its steps is imported as it is (the step after a
gap has no parent link) and reported; `banana100 verify` and `build-dataset` will say so too.
Re-running the same command resumes: images already in the run's manifest are skipped. A run
folder this import did not make (another folder's images, a `generate` run) is refused rather
than spliced into, and so are a source file changed since it was imported and new steps for a
chain already there from a folder that lacks its recorded steps. The import holds the run folder's
lock (`.generate.lock`, as `generate` does): a second import or a `generate` into the same
folder at the same time is refused with one line, so none reads a manifest another is appending to.
"""

from __future__ import annotations

import io
import json
import os
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from banana100.errors import ImportChainsError, ImportOptionError
from banana100.chains.manifest import MANIFEST_NAME, ManifestWriter, read_manifest, utc_now
from banana100.chains.plan import step_ranges
from banana100.chains.store import LOCK_FILE
from banana100.fileio import ExclusiveLock, fsync_dir, read_regular_bytes, sha256_bytes, sha256_file, write_file_atomic
from banana100.schema import CHAT_MODES
from banana100.schema import chain_id as make_chain_id

FIELDS = ("chain", "source", "setting", "repeat", "step", "model", "chat", "variant")
_NUMERIC = ("step", "repeat")
_TEMPLATE_FIELD = re.compile(r"\{(\w+)(?::0?(\d*)d)?\}")


def compile_pattern(pattern: str) -> re.Pattern:
    """A template (`{chain}/step_{step:03d}.png`) or `re:` regular expression -> compiled regex."""
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error as e:
            raise ImportOptionError(f"--pattern {pattern!r}: not a valid regular expression ({e})") from None
    else:
        out, pos, seen = [], 0, set()
        for m in _TEMPLATE_FIELD.finditer(pattern):
            out.append(_literal(pattern[pos : m.start()]))
            name, width = m.group(1), m.group(2)
            if name not in FIELDS:
                raise ImportOptionError(f"--pattern {pattern!r}: unknown field {{{name}}}; fields: {', '.join(FIELDS)}")
            if name in seen:
                out.append(f"(?P={name})")
            elif name in _NUMERIC or m.group(0).endswith("d}"):
                out.append(f"(?P<{name}>\\d{{{int(width)},}})" if width else f"(?P<{name}>\\d+)")
            else:
                out.append(f"(?P<{name}>[^/]+?)")
            seen.add(name)
            pos = m.end()
        out.append(_literal(pattern[pos:]))
        rx = re.compile("".join(out))
    unknown = set(rx.groupindex) - set(FIELDS)
    if unknown:
        raise ImportOptionError(f"--pattern: unknown group(s) {sorted(unknown)}; fields: {', '.join(FIELDS)}")
    if "step" not in rx.groupindex:
        raise ImportOptionError("--pattern must have a {step} field (named group `step` in a regex)")
    if not {"chain", "source"} & set(rx.groupindex):
        raise ImportOptionError("--pattern must have a {chain} or a {source} field")
    return rx


def _literal(text: str) -> str:
    parts = []
    i = 0
    while i < len(text):
        if text.startswith("**/", i):
            parts.append("(?:[^/]+/)*")
            i += 3
        elif text[i] == "*":
            parts.append("[^/]*")
            i += 1
        else:
            parts.append(re.escape(text[i]))
            i += 1
    return "".join(parts)


@dataclass
class ImportSummary:
    out_dir: Path
    chains: int
    imported: int
    skipped_existing: int
    unmatched: int
    gaps: dict[str, list[int]]

    def __str__(self) -> str:
        s = (f"{self.out_dir}: {self.imported} images imported in {self.chains} chains"
             f" ({self.skipped_existing} already there, {self.unmatched} files did not match the pattern)")
        if self.gaps:
            s += f"; {len(self.gaps)} chain(s) with missing steps: " + "; ".join(
                f"{c} {v[:10]}{'...' if len(v) > 10 else ''}" for c, v in sorted(self.gaps.items()))
        return s


def chat_mode_of(value: str | None, where: str) -> str | None:
    """`same`/`different` from a path part or option (`same_chat`, `Same-Chat`, `diff`, `new_chat`,
    `multi-turn`...); None stays None (the paper's different chat). Anything else names `where`."""
    if value is None:
        return None
    word = re.sub(r"[^a-z]", "", value.lower())
    word = word[:-4] if word.endswith("chat") and len(word) > 4 else word
    modes = {"same": "same", "multiturn": "same", "different": "different", "diff": "different",
             "new": "different", "separate": "different", "singleturn": "different"}
    if word not in modes:
        raise _error_at(where)(f"{where}: chat mode {value!r} is neither {' nor '.join(CHAT_MODES)} "
                                "(e.g. same_chat, different_chat)")
    return modes[word]


def _safe(value: str, what: str, path: str) -> str:
    value = value.strip()
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", value):
        raise _error_at(path)(f"{path}: the {what} {value!r} is not a usable name: letters, digits, _ . - "
                              "only, starting with a letter or a digit")
    return value


def _error_at(where: str) -> type[ImportChainsError]:
    """An option's value (`--variant`) is a usage error; a file's path part is the folder's."""
    return ImportOptionError if where.startswith("--") else ImportChainsError


@dataclass
class PlannedChain:
    """One chain found by a pattern: its id, (source, setting, repeat, model, chain name, chat mode,
    variant) and files by step."""

    chain_id: str
    key: tuple
    files: dict[int, str]  # step -> path relative to the folder, with `/`

    @property
    def source_id(self) -> str:
        return self.key[0]

    @property
    def setting(self) -> str:
        return self.key[1]

    @property
    def repeat(self) -> int:
        return self.key[2]

    @property
    def chat_mode(self) -> str | None:
        return self.key[5]

    @property
    def variant(self) -> str | None:
        return self.key[6]


@dataclass
class ChainPlan:
    chains: dict[str, PlannedChain]  # chain id -> chain
    unmatched: int


def plan_chains(rel_paths, pattern: str, setting: str = "replicate", repeat: int = 0,
                model: str = "unknown", chat_mode: str | None = None, variant: str | None = None) -> ChainPlan:
    """Group file paths (relative, with `/`) into chains by `pattern` (see the module doc).

    The one place that says which file is which chain and step: `import_chains` uses it on a
    local folder, the Space on a remote listing (a Hub dataset repo) before anything is
    downloaded. Same errors as `import_chains` for duplicate steps and colliding chain ids.
    """
    rx = compile_pattern(pattern)
    chat_mode = chat_mode_of(chat_mode, "--chat-mode")
    if variant is not None:
        variant = _safe(variant, "variant", "--variant")
    if "setting" not in rx.groupindex:  # every chain's setting is the option's
        setting = _safe(setting, "setting", "--setting")
    chains: dict[tuple, dict[int, str]] = defaultdict(dict)
    unmatched = 0
    for rel in rel_paths:
        m = rx.fullmatch(rel)
        if not m:
            unmatched += 1
            continue
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        src = _safe(g.get("source") or g["chain"], "source", rel)
        st = _safe(g.get("setting") or setting, "setting", rel)
        rep = int(g.get("repeat", repeat))
        mod = g.get("model") or model
        chat = chat_mode_of(g["chat"], rel) if "chat" in g else chat_mode
        var = _safe(g["variant"], "variant", rel) if "variant" in g else variant
        key = (src, st, rep, mod, g.get("chain") if "source" in g else None, chat, var)
        step = int(g["step"])
        if step in chains[key]:
            raise ImportChainsError(f"{rel} and {chains[key][step]}: two files for "
                                    f"chain {make_chain_id(src, st, rep, chat, var)} step {step}")
        chains[key][step] = rel
    ids: dict[str, tuple] = {}
    for key in chains:
        cid = make_chain_id(*key[:3], chat_mode=key[5], variant=key[6])
        if cid in ids:
            raise ImportChainsError(f"two chains map to the chain id {cid!r} ({ids[cid]} and {key}); add a "
                                    "{repeat}, {setting} or {variant} field to the pattern")
        ids[cid] = key
    return ChainPlan({cid: PlannedChain(cid, key, dict(chains[key])) for cid, key in ids.items()}, unmatched)


def import_chains(folder: str | os.PathLike, pattern: str, out_dir: str | os.PathLike, setting: str = "replicate",
                  repeat: int = 0, model: str = "unknown", prompt: str | None = None, link: bool = False,
                  chat_mode: str | None = None, variant: str | None = None) -> ImportSummary:
    """Import `folder` (see the module doc) into the run folder `out_dir`; resumable."""
    folder, out_dir = Path(folder), Path(out_dir)
    if not folder.is_dir():
        raise ImportChainsError(f"{folder} is not a folder")
    if out_dir.resolve() == folder.resolve() or folder.resolve() in out_dir.resolve().parents:
        raise ImportOptionError(f"--out {out_dir} must not be inside the folder being imported")
    rel_paths = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        rel_paths.extend((Path(root) / name).relative_to(folder).as_posix() for name in sorted(names))
    planned = plan_chains(rel_paths, pattern, setting=setting, repeat=repeat, model=model, chat_mode=chat_mode,
                          variant=variant)
    if not planned.chains:
        raise ImportChainsError(f"no file under {folder} matches --pattern {pattern!r} ({planned.unmatched} files seen)")
    out_dir.mkdir(parents=True, exist_ok=True)
    # the run folder's lock, as `generate` takes it: a second import (or a generate) into the same
    # --out is refused while this one works, so no two of them read the same manifest and both append
    with ExclusiveLock(out_dir / LOCK_FILE, out_dir, "banana100 generate or import-chains"):
        return _import_locked(folder, pattern, out_dir, planned, prompt, link)


def _import_locked(folder: Path, pattern: str, out_dir: Path, planned: ChainPlan, prompt: str | None,
                   link: bool) -> ImportSummary:
    unmatched = planned.unmatched
    ids = {cid: c.key for cid, c in planned.chains.items()}
    chains = {c.key: {step: folder / rel for step, rel in c.files.items()} for c in planned.chains.values()}

    existing = {}
    if (out_dir / MANIFEST_NAME).exists():
        existing = {(r["chain_id"], r["step"]): r for r in read_manifest(out_dir)}
    _check_resumable(out_dir, folder, planned, existing)
    known_prompts = _prompts()
    gaps: dict[str, list[int]] = {}
    imported = skipped = 0
    with ManifestWriter(out_dir) as writer:
        for cid in sorted(ids):
            src, st, rep, mod, _, chat, var = ids[cid]
            steps = chains[ids[cid]]
            missing = sorted(set(range(0, max(steps) + 1)) - set(steps))
            if missing:
                gaps[cid] = missing
            parent = None
            for step in sorted(steps):
                path = steps[step]
                if step - 1 not in steps:
                    parent = None
                if (cid, step) in existing:
                    parent = existing[(cid, step)]["sha256"]
                    skipped += 1
                    continue
                data, width, height = _read_image(path)
                rel = f"{cid}/step_{step:03d}{path.suffix.lower()}"
                target = out_dir / rel
                if link:
                    _link_atomic(path, target, data)
                else:
                    write_file_atomic(target, data)
                sha = sha256_bytes(data)
                p = None
                if step > 0:
                    p = prompt or (known_prompts[st](step) if st in known_prompts else None)
                writer.append({
                    "chain_id": cid, "source_id": src, "setting": st, "repeat": rep, "chat_mode": chat,
                    "variant": var, "step": step,
                    "image": rel, "sha256": sha, "parent_sha256": parent if step > 0 else None, "prompt": p,
                    "editor": "source" if step == 0 else "imported", "model": "source" if step == 0 else mod,
                    "width": width, "height": height, "created_at": utc_now(),
                    "editor_info": json.dumps({"imported_from": path.relative_to(folder).as_posix()}),
                })
                parent = sha
                imported += 1
    if gaps:
        warnings.warn(f"{len(gaps)} imported chain(s) have missing steps: "
                      + "; ".join(f"{c}: {v}" for c, v in sorted(gaps.items())[:10]), stacklevel=2)
    return ImportSummary(out_dir, len(ids), imported, skipped, unmatched, gaps)


def _imported_from(record: dict) -> str | None:
    """The path (relative to the imported folder) a record of `import_chains` was copied from."""
    try:
        info = json.loads(record.get("editor_info") or "{}")
    except (TypeError, ValueError):
        return None
    return info.get("imported_from") if isinstance(info, dict) else None


def _check_resumable(out_dir: Path, folder: Path, planned: ChainPlan, existing: dict) -> None:
    """Refuse to splice into a chain that this import did not make: every step already in the
    run folder's manifest must have been imported from the same file, with the same bytes, and a
    chain that gets new steps must hold all of its recorded steps in this import."""
    if not existing:
        return
    if (out_dir / "run.json").exists():
        raise ImportChainsError(f"{out_dir} was made by `banana100 generate` ({out_dir / 'run.json'}); importing "
                                "into it would splice other images onto its chains: use a new --out folder")
    _check_continues(out_dir, folder, planned, existing)
    for cid, chain in planned.chains.items():
        for step, rel in chain.files.items():
            record = existing.get((cid, step))
            if record is None:
                continue
            source = _imported_from(record)
            where = f"{out_dir / MANIFEST_NAME}: chain {cid!r} step {step}"
            if source != rel:
                raise ImportChainsError(
                    f"{where} holds {'an image imported from ' + repr(source) if source else 'an image not imported'}"
                    f", not {folder / rel}: this import would splice other images onto a chain it did not make; "
                    "use a new --out folder")
            try:
                same = sha256_file(folder / rel) == record["sha256"]
            except OSError as e:
                raise ImportChainsError(f"{folder / rel}: cannot read ({e.strerror or e})") from None
            if not same:
                raise ImportChainsError(
                    f"{folder / rel} is not the image imported as {where} (its sha256 differs): this import would "
                    "splice other images onto a chain it did not make; use a new --out folder")


def _check_continues(out_dir: Path, folder: Path, planned: ChainPlan, existing: dict) -> None:
    """A chain already in the run folder may grow only from an import that has every step recorded
    there (its own folder, grown): new steps from a folder without them would be spliced onto
    images of another source."""
    recorded: dict[str, list[int]] = defaultdict(list)
    for cid, step in existing:
        recorded[cid].append(step)
    for cid, chain in sorted(planned.chains.items()):
        new = sorted(set(chain.files) - set(recorded.get(cid, ())))
        absent = sorted(set(recorded.get(cid, ())) - set(chain.files))
        if new and absent:
            raise ImportChainsError(
                f"{out_dir} already holds chain {cid!r} with steps {step_ranges(sorted(recorded[cid]))}, which "
                f"{folder} does not have (steps {step_ranges(absent)} are not there): importing its steps "
                f"{step_ranges(new)} would splice them onto a chain from another import. Import them into another "
                "--out folder, or import the whole chain from one folder")


def _read_image(path: Path) -> tuple[bytes, int, int]:
    """The file's bytes and size (width, height), once it has decoded in full (a truncated or
    corrupt image, or a path that is not a regular file, is refused naming the file)."""
    from PIL import Image

    try:
        data = read_regular_bytes(path)
    except OSError as e:
        raise ImportChainsError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()  # every pixel: a truncated file fails here, not in a later build or score
            width, height = im.size
    except Exception as e:  # noqa: BLE001 - PIL raises many types for broken files
        raise ImportChainsError(f"{path}: not an image that decodes ({type(e).__name__}: {e})") from None
    return data, width, height


def _link_atomic(path: Path, target: Path, data: bytes) -> None:
    """Hard-link `path` to `target` (a copy where links are not possible), atomically."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.unlink(missing_ok=True)
    try:
        os.link(path, tmp)
    except OSError:
        write_file_atomic(target, data)
        return
    os.replace(tmp, target)
    fsync_dir(target.parent)


def _prompts() -> dict:
    from banana100.errors import SettingError
    from banana100.chains.settings import load_settings

    try:
        return {name: s.prompt for name, s in load_settings().items()}
    except SettingError:
        return {}
