"""Reading and checking the run folders a dataset is built from.

    items = collect_items([Path("runs/a"), Path("runs/b")])  # every record, merged, in dataset order
    check_images(items, workers=4)  # one DatasetError listing every missing or damaged image

`collect_items` reads each run folder's `manifest.jsonl` (fields: `banana100.schema.RECORD_FIELDS`)
and checks the chains (one run folder per chain, parent links, setting names usable as configs);
`check_images` checks every image: present, SHA-256 equal to the manifest's, decodable, of the
recorded size.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from banana100.chains.manifest import image_path, read_manifest
from banana100.dataset.layout import RESERVED_CONFIGS
from banana100.errors import DatasetError
from banana100.fileio import read_regular_bytes, sha256_bytes
from banana100.schema import CHAIN_KEYS
from banana100.workers import process_pool

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MAX_LISTED_PROBLEMS = 20


@dataclass(frozen=True)
class Item:
    """One manifest record of a run folder; its image is `path`."""

    run_dir: Path
    record: dict

    @property
    def path(self) -> Path:
        return self.run_dir / self.record["image"]

    @property
    def where(self) -> str:
        return f"chain {self.record['chain_id']!r} step {self.record['step']}"


def collect_items(run_dirs: list[Path]) -> list[Item]:
    """Every record of the run folders, merged, checked for collisions, in dataset order.

    Raises ManifestError (from `read_manifest`) for a folder without a valid manifest and
    DatasetError for a chain found in two run folders, a broken parent link or an unusable
    setting name.
    """
    if not run_dirs:
        raise DatasetError("no run folders given")
    seen_dirs: set[Path] = set()
    owner: dict[str, Path] = {}
    items: list[Item] = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        key = run_dir.resolve()
        if key in seen_dirs:
            warnings.warn(f"{run_dir}: run folder given twice; reading it once", stacklevel=3)
            continue
        seen_dirs.add(key)
        records = read_manifest(run_dir)  # ManifestError propagates
        chains_here = set()
        for record in records:
            cid = record["chain_id"]
            if cid in owner and owner[cid] != run_dir:
                raise DatasetError(
                    f"chain {cid!r} appears in two run folders, {owner[cid]} and {run_dir}: a chain must come "
                    "from one run (rename or drop one of them before merging)"
                )
            owner[cid] = run_dir
            chains_here.add(cid)
            items.append(Item(run_dir, record))
    if not items:
        raise DatasetError(f"the run folders {', '.join(map(str, run_dirs))} hold no images (empty manifests)")

    settings = sorted({it.record["setting"] for it in items})
    for s in settings:
        if not _SAFE_NAME.match(s) or s in RESERVED_CONFIGS:
            raise DatasetError(
                f"setting name {s!r} cannot be a dataset config (it must match {_SAFE_NAME.pattern} "
                f"and not be one of {RESERVED_CONFIGS})"
            )
    items.sort(key=lambda it: (it.record["setting"], it.record["chain_id"], it.record["step"]))
    _check_chains(items)
    return items


def _check_chains(items: list[Item]) -> None:
    problems = []
    by_chain: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_chain[it.record["chain_id"]].append(it)
    for cid, chain in by_chain.items():
        keys = {tuple(it.record.get(k) for k in CHAIN_KEYS) for it in chain}
        if len(keys) > 1:
            problems.append(f"chain {cid!r}: records disagree on {'/'.join(CHAIN_KEYS)}: {sorted(keys, key=str)}")
        by_step = {it.record["step"]: it for it in chain}
        for it in chain:
            k = it.record["step"]
            parent = by_step.get(k - 1)
            if k > 0 and parent is not None and it.record["parent_sha256"] != parent.record["sha256"]:
                problems.append(
                    f"{it.path} ({it.where}): parent_sha256 does not match step {k - 1}'s sha256 "
                    f"({parent.path}): the chain's lineage is broken"
                )
        steps = sorted(by_step)
        missing = sorted(set(range(steps[0], steps[-1] + 1)) - set(steps))
        if steps[0] != 0 or missing:
            warnings.warn(
                f"chain {cid!r} is incomplete (steps {steps[0]}..{steps[-1]}, missing {missing or 'step 0'}); "
                "its images are included as they are",
                stacklevel=4,
            )
    _raise_problems("the run folders' chains are inconsistent", problems)


def _raise_problems(headline: str, problems: list[str]) -> None:
    if not problems:
        return
    shown = "\n  ".join(problems[:_MAX_LISTED_PROBLEMS])
    more = len(problems) - _MAX_LISTED_PROBLEMS
    tail = f"\n  ... and {more} more" if more > 0 else ""
    raise DatasetError(f"{headline} ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  {shown}{tail}")


def check_image(item: Item) -> str | None:
    """None when the image is fine, else a message that names the file and the chain step."""
    path = item.path
    try:
        data = read_regular_bytes(path)  # a FIFO fails at once instead of hanging
    except FileNotFoundError:
        return f"{path}: missing image file ({item.where})"
    except OSError as e:
        return f"{path}: cannot read ({e.strerror}) ({item.where})"
    digest = sha256_bytes(data)
    if digest != item.record["sha256"]:
        return (
            f"{path}: corrupted: its SHA-256 is {digest[:16]}..., the manifest says "
            f"{item.record['sha256'][:16]}... ({item.where})"
        )
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()  # container-level checks (PNG chunk CRCs)
        with Image.open(io.BytesIO(data)) as im:
            im.load()  # full decode: catches truncated or broken pixel data
            size = im.size
    except UnidentifiedImageError:
        return f"{path}: not an image file PIL can read ({item.where})"
    except Exception as e:  # noqa: BLE001 - PIL raises many types for broken files
        return f"{path}: corrupt image that does not decode ({type(e).__name__}: {e}) ({item.where})"
    expected = (item.record["width"], item.record["height"])
    if size != expected:
        return f"{path}: image is {size[0]}x{size[1]} but the manifest says {expected[0]}x{expected[1]} ({item.where})"
    return None


def stat_key(item: Item) -> str | None:
    """An image as checked: its path, size, modification time and expected hash."""
    try:
        st = item.path.stat()
    except OSError:
        return None
    return f"{item.path.resolve()}\t{st.st_size}\t{st.st_mtime_ns}\t{item.record['sha256']}"


def check_images(items: list[Item], workers: int | None = None, processes: bool = False,
                  already_checked: set[str] | frozenset = frozenset()) -> None:
    """Check every image; raise one DatasetError listing every bad file (path, chain, step).

    Threads by default (hashing and PNG decoding release the GIL); `processes=True` spreads the
    work over `workers` processes instead. Images whose `stat_key` is in `already_checked`
    (checked by an interrupted earlier build, unchanged since) are not decoded again.
    """
    for it in items:  # a manifest path must not leave its run folder (the rule `score` uses too)
        image_path(it.run_dir, it.record)
    if already_checked:
        items = [it for it in items if stat_key(it) not in already_checked]
    workers = workers or min(8, os.cpu_count() or 1)
    if processes and workers > 1:
        pool = process_pool(workers)
        chunk = max(1, min(64, len(items) // (workers * 8)))
    else:
        pool, chunk = ThreadPoolExecutor(max_workers=workers), 1
    with pool:
        results = pool.map(check_image, items, chunksize=chunk)
        problems = [p for p in progress(results, len(items), "checking images") if p]
    _raise_problems("cannot build the dataset: some images are missing or damaged", problems)


def progress(iterable, total: int, desc: str):
    """A tqdm bar on a terminal, silent elsewhere (tests, logs)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="img", disable=None, leave=False)
