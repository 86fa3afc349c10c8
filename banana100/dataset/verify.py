"""`banana100 verify DATASET_DIR`: check a built dataset folder, row by row, without `datasets`.

    report = verify_dataset("banana100-dataset")
    for p in report.problems:
        print(p)            # "chain 'moss__replicate__r0' step 7: image bytes do not match sha256 ..."
    report.ok               # True when nothing is wrong

What is checked:

- counts: every config of the card has data files, and its row count (Parquet footers) equals
  the card's `dataset_info` `num_examples`;
- hashes: the SHA-256 of every embedded image equals its row's `sha256` (default and
  `endpoints` configs: every byte is read once), and the PNG header's size equals `width` x
  `height` (`decode=True` also decodes every image in full);
- chains: no step appears twice, steps run 0, 1, 2, ... without a gap, each step's
  `parent_sha256` is the previous step's `sha256` (null at step 0), and a chain's rows agree
  on setting, source and repeat;
- configs: a setting config holds exactly that setting's rows, a `model-*` config exactly the
  chains of that editor model (`layout.chain_models`), `endpoints` exactly the rows of the
  endpoint steps (`layout.ENDPOINT_STEPS`), each with the same hash as in `default`.

Every problem names its chain and step (or its file and config). Memory holds a few small
fields per row, never the images: a batch of rows is read, hashed and dropped.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from banana100.dataset.layout import (
    CARD_NAME,
    DEFAULT_CONFIG,
    ENDPOINT_STEPS,
    ENDPOINTS_CONFIG,
    MODEL_CONFIG_PREFIX,
    chain_models,
    model_config,
)
from banana100.dataset.reader import card_configs, card_row_counts, dataset_files, footer_rows, iter_file_batches
from banana100.errors import DatasetError
from banana100.fileio import sha256_bytes
from PIL import UnidentifiedImageError
from banana100.schema import CHAIN_KEYS

_META = ("chain_id", "step", "sha256", "parent_sha256", "setting", "source_id", "repeat", "chat_mode", "variant", "model",
         "width", "height")


@dataclass(frozen=True)
class Problem:
    kind: str  # counts | hash | size | decode | duplicate | gap | parent | chain | config | file
    message: str
    chain_id: str | None = None
    step: int | None = None
    where: str | None = None  # file (and row) or config

    def __str__(self) -> str:
        if self.chain_id is not None:
            at = f"chain {self.chain_id!r}" + (f" step {self.step}" if self.step is not None else "")
            return f"{at}: {self.message}" + (f" ({self.where})" if self.where else "")
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass
class VerifyReport:
    dataset_dir: Path
    rows: int = 0
    chains: int = 0
    configs: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.configs.items())
        head = f"{self.dataset_dir}: {self.rows} rows in {self.chains} chains; configs: {counts}"
        if self.ok:
            return head + "\nOK: counts, hashes, parent links and steps all check out"
        kinds = Counter(p.kind for p in self.problems)
        return head + f"\n{len(self.problems)} problem(s): " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))


def _png_size(data: bytes, decode: bool) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        if decode:
            im.load()
        return im.size


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def describe_image_error(e: Exception, decode: bool) -> str:
    """What is wrong with an embedded image, without PIL's `<_io.BytesIO object at 0x...>`."""
    if isinstance(e, UnidentifiedImageError):
        return "not an image PIL can read"
    text = _OBJECT_REPR.sub("the image bytes", str(e))
    return f"image does not {'decode' if decode else 'open'} ({type(e).__name__}: {text})"


def _scan(dataset_dir: Path, files: list[Path], with_images: bool, decode: bool, workers: int, broken: set):
    """Yield (meta dict, where, computed sha256 or None, size problem or None) for every row;
    (None, file path relative to the dataset, None, why) for a file that cannot be read, once:
    a file already in `broken` (another config's view of it) is skipped."""

    def check(data):
        if data is None:
            return None, "no image bytes"
        digest = sha256_bytes(data)
        try:
            return digest, _png_size(data, decode)
        except Exception as e:  # noqa: BLE001 - PIL raises many types for broken files
            return digest, describe_image_error(e, decode)

    with ThreadPoolExecutor(workers) as pool:
        for path in files:
            name = _relative(dataset_dir, path)
            if path in broken:
                continue
            try:
                for row, records, images in iter_file_batches(path, _META, with_images):
                    checks = [(None, None)] * len(records)
                    if with_images:
                        checks = list(pool.map(check, (images[j].as_py() for j in range(len(records)))))
                    for j, meta in enumerate(records):
                        yield meta, f"{name} row {row + j}", *checks[j]
            except DatasetError as e:
                broken.add(path)
                yield None, name, None, _OBJECT_REPR.sub("the file", str(e).removeprefix(f"{path}: "))


def _relative(dataset_dir: Path, path: Path) -> str:
    """A data file named by its path in the dataset (`data/replicate/x/train-00000-of-00001.parquet`):
    the same file name exists in every config's folder."""
    try:
        return path.relative_to(dataset_dir).as_posix()
    except ValueError:
        return str(path)


def verify_dataset(dataset_dir: str | os.PathLike, decode: bool = False, workers: int | None = None) -> VerifyReport:
    """Check a dataset folder (see the module doc); never raises for damaged data, only reports."""
    dataset_dir = Path(dataset_dir)
    configs = card_configs(dataset_dir)
    if configs is None:
        raise DatasetError(f"{dataset_dir} is not a dataset folder (no {CARD_NAME} with YAML `configs`)")
    workers = workers or min(8, os.cpu_count() or 1)
    report = VerifyReport(dataset_dir)
    add = report.problems.append
    files = _config_files(dataset_dir, [c["config_name"] for c in configs], add)
    if not files.get(DEFAULT_CONFIG):
        add(Problem("config", "no `default` config with data files", where=str(dataset_dir)))
        return report
    broken: set[Path] = set()  # data files that cannot be read: each reported once, by the first config
    rows = _default_rows(dataset_dir, files[DEFAULT_CONFIG], True, decode, workers, broken, report)
    report.chains = _check_chains(rows, broken, add)
    expected = card_row_counts(dataset_dir)
    for name, config_files in files.items():
        _check_config(dataset_dir, name, config_files, rows, expected, decode, workers, broken, report)
    return report


def duplicated_steps(dataset_dir: str | os.PathLike) -> list[Problem]:
    """The rows of the default config that repeat a (chain, step), each named with both places (a shard
    copied twice): read from the metadata columns alone, no image, before `score` reads a dataset."""
    dataset_dir = Path(dataset_dir)
    report = VerifyReport(dataset_dir)
    _default_rows(dataset_dir, dataset_files(dataset_dir, DEFAULT_CONFIG), False, False, 1, set(), report)
    return [p for p in report.problems if p.kind == "duplicate"]


def _config_files(dataset_dir: Path, names: list[str], add) -> dict[str, list[Path]]:
    """Each config's data files; a config whose files cannot be listed is a problem, with none."""
    files: dict[str, list[Path]] = {}
    for name in names:
        try:
            files[name] = dataset_files(dataset_dir, name)
        except DatasetError as e:
            add(Problem("counts", str(e), where=f"config {name}"))
            files[name] = []
    return files


def _default_rows(dataset_dir: Path, files: list[Path], with_images: bool, decode: bool, workers: int, broken: set,
                  report: VerifyReport) -> dict[tuple[str, int], dict]:
    """The default config, every row (and with `with_images` every byte): {(chain, step): its fields and
    where}; each row's hash and size checked, a step found twice reported (the first row kept)."""
    add = report.problems.append
    rows: dict[tuple[str, int], dict] = {}
    for meta, where, digest, size in _scan(dataset_dir, files, with_images, decode, workers, broken):
        if meta is None:
            add(Problem("file", f"{size}; its rows are not checked", where=where))
            continue
        report.rows += 1
        cid, step = meta["chain_id"], meta["step"]
        if with_images:
            _check_row(meta, where, digest, size, add)
        key = (cid, step)
        if key in rows:
            same = "the same image" if rows[key]["sha256"] == meta["sha256"] else "a different image"
            add(Problem("duplicate", f"step appears twice ({rows[key]['where']} and {where}), with {same}",
                        cid, step, where))
            continue
        rows[key] = {k: meta[k] for k in ("sha256", "parent_sha256", "model", *CHAIN_KEYS)}
        rows[key]["where"] = where
    return rows


def _check_chains(rows: dict[tuple[str, int], dict], broken: set, add) -> int:
    """Each chain's steps (no gap), parent links and shared fields; the number of chains."""
    chains: dict[str, dict[int, dict]] = defaultdict(dict)
    for (cid, step), r in rows.items():
        chains[cid][step] = r
    for cid in sorted(chains):
        chain = chains[cid]
        steps = sorted(chain)
        # rows of an unreadable file are unknown: their steps would be reported as gaps, against
        # intact files, so gaps are only checked when every file could be read
        missing = sorted(set(range(0, steps[-1] + 1)) - set(steps)) if not broken else []
        for k in missing:
            add(Problem("gap", f"missing (the chain has steps up to {steps[-1]})", cid, k))
        for k in steps:
            r = chain[k]
            if k == 0:
                if r["parent_sha256"] is not None:
                    add(Problem("parent", "step 0 has a parent_sha256 (should be null)", cid, k, r["where"]))
            elif k - 1 in chain and r["parent_sha256"] != chain[k - 1]["sha256"]:
                add(Problem("parent", f"parent_sha256 {str(r['parent_sha256'])[:12]}... is not step {k - 1}'s "
                            f"sha256 {chain[k - 1]['sha256'][:12]}...: broken parent link", cid, k, r["where"]))
        keys = {tuple(r[k] for k in CHAIN_KEYS) for r in chain.values()}
        if len(keys) > 1:
            add(Problem("chain", f"rows disagree on {'/'.join(CHAIN_KEYS)}: {sorted(keys, key=str)}", cid))
    return len(chains)


def _config_rows(name: str, rows: dict[tuple[str, int], dict]) -> tuple[set | None, bool]:
    """(the (chain, step) keys config `name` must hold exactly, whether its images are checked);
    (None, False) for a config that is none of the known kinds."""
    if name == ENDPOINTS_CONFIG:
        return {k for k in rows if k[1] in ENDPOINT_STEPS}, True
    if name in {r["setting"] for r in rows.values()}:
        return {k for k, r in rows.items() if r["setting"] == name}, False
    if name.startswith(MODEL_CONFIG_PREFIX):
        chain_model = chain_models((cid, step, r["model"]) for (cid, step), r in rows.items())
        return {k for k in rows if model_config(chain_model[k[0]]) == name}, False
    return None, False


def _check_config(dataset_dir: Path, name: str, files: list[Path], rows: dict, expected: dict, decode: bool,
                  workers: int, broken: set, report: VerifyReport) -> None:
    """One config: its row count against the card, and (but default) its rows against the default's."""
    add = report.problems.append
    n = sum(_footer_rows(f) for f in files)
    report.configs[name] = n
    unreadable = any(f in broken for f in files)
    if name in expected and expected[name] != n and not unreadable:
        add(Problem("counts", f"{n} rows, the card's dataset_info says {expected[name]}", where=f"config {name}"))
    if name == DEFAULT_CONFIG or not files:
        return
    want, with_images = _config_rows(name, rows)
    if want is None:
        if not broken:  # else its rows may all be in the unreadable file
            add(Problem("config", "neither a setting of the data, a model-* nor the endpoints config",
                        where=f"config {name}"))
        return
    seen = set()
    for meta, where, digest, size in _scan(dataset_dir, files, with_images, decode and with_images, workers, broken):
        if meta is None:
            add(Problem("file", f"{size}; its rows are not checked", where=where))
            unreadable = True
            continue
        key = (meta["chain_id"], meta["step"])
        where = f"config {name}: {where}"
        if digest is not None:
            _check_row(meta, where, digest, size, add)
        if key in seen:
            add(Problem("duplicate", f"appears twice in config {name}", *key, where))
        elif key not in rows and broken:
            pass  # its default row may be in the unreadable file, reported already
        elif key not in want:
            add(Problem("config", f"does not belong in config {name}", *key, where))
        elif rows[key]["sha256"] != meta["sha256"]:
            add(Problem("config", "sha256 differs from the default config's row", *key, where))
        seen.add(key)
    if unreadable or any(f in broken for f in files):
        return  # its rows in the unreadable file are unknown, not missing
    for key in sorted(want - seen):
        add(Problem("config", f"missing from config {name}", *key))


def _check_row(meta: dict, where: str, digest, size, add) -> None:
    cid, step = meta["chain_id"], meta["step"]
    if digest is None:
        add(Problem("hash", size or "no image bytes", cid, step, where))
        return
    if digest != meta["sha256"]:
        add(Problem("hash", f"image bytes hash to {digest[:12]}..., the row's sha256 is {str(meta['sha256'])[:12]}...",
                    cid, step, where))
    if isinstance(size, str):
        add(Problem("decode", size, cid, step, where))
    elif size is not None and size != (meta["width"], meta["height"]):
        add(Problem("size", f"image is {size[0]}x{size[1]}, the row says {meta['width']}x{meta['height']}",
                    cid, step, where))


def _footer_rows(path: Path) -> int:
    try:
        return footer_rows(path)
    except DatasetError:  # reported by the scan
        return 0
