"""Chains on disk or on the Hub: the images of every chain of a run folder, a dataset folder or a
Hub dataset (`ChainImages`), read per chain when first shown."""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from banana100.errors import Banana100Error, DatasetError, ImageReadError
from banana100.explore.common import DISPLAY_SIDE, jpeg_bytes, thumbnail


@dataclass(frozen=True)
class ChainInfo:
    chain_id: str
    source_id: str
    setting: str
    repeat: int
    steps: tuple[int, ...]
    chat_mode: str | None = None  # None: the paper's different chat (schema.py)
    variant: str | None = None

    @property
    def kind(self) -> str:
        """What tells this chain apart beyond source, setting and repeat ("" for the paper's chains)."""
        return ", ".join(p for p in (self.variant, "same chat" if self.chat_mode == "same" else None) if p)

    @property
    def choice(self) -> int | str:
        """The chain's entry in the Space's third picker: its repeat, or its kind and repeat."""
        return f"{self.kind}, repeat {self.repeat}" if self.kind else self.repeat

    @property
    def label(self) -> str:
        kind = f" | {self.kind}" if self.kind else ""
        return f"{self.source_id} | {self.setting}{kind} | repeat {self.repeat} ({len(self.steps)} images)"

    @property
    def last_step(self) -> int:
        return max(self.steps)


class ChainImages:
    """The images of every chain of a run folder, a dataset folder or a Hub dataset.

    Only record columns are read up front; a chain's images are read when it is first shown
    (a dataset: only the row groups holding that chain) and kept, at display size, for the
    `keep` chains shown last.
    """

    def __init__(self, location: str, kind: str, chains: dict[str, ChainInfo], loader, keep: int = 4,
                 max_side: int = DISPLAY_SIDE):
        self.location = location
        self.kind = kind  # "run folder" | "dataset folder" | "Hub dataset"
        self.chains = chains
        self._loader = loader  # chain_id -> {step: encoded image bytes}
        self._cache: OrderedDict[str, dict[int, bytes]] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()
        self.max_side = max_side

    @classmethod
    def open(cls, location: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> ChainImages:
        """A local run folder (manifest.jsonl), a local dataset folder, or a Hub dataset id."""
        from banana100.dataset.reader import is_dataset_dir
        from banana100.chains.manifest import MANIFEST_NAME

        path = Path(location)
        if (path / MANIFEST_NAME).is_file():
            return _run_folder(path)
        if is_dataset_dir(path):
            from fsspec.implementations.local import LocalFileSystem

            from banana100.dataset.reader import dataset_files

            return _dataset(str(path), "dataset folder", LocalFileSystem(), [str(f) for f in dataset_files(path)])
        if path.exists():
            raise DatasetError(f"{path} is neither a run folder (no {MANIFEST_NAME}) nor a dataset folder "
                               "(no README.md with YAML configs)")
        text = str(location)
        if text.count("/") == 1 and not text.startswith((".", "/")):
            return _hub_dataset(text, cache_dir)
        raise DatasetError(f"{location}: no such folder, and not a Hub dataset id (owner/name)")

    def chain_ids(self) -> list[str]:
        return sorted(self.chains)

    def _chain(self, chain_id: str) -> dict[int, bytes]:
        with self._lock:
            if chain_id in self._cache:
                self._cache.move_to_end(chain_id)
                return self._cache[chain_id]
        raw = self._loader(chain_id)
        thumbs = {}
        for step, data in raw.items():
            try:
                with Image.open(io.BytesIO(data)) as img:
                    thumbs[step] = jpeg_bytes(thumbnail(img, self.max_side))
            except Exception as e:  # noqa: BLE001 - one unreadable image must not hide the chain
                raise ImageReadError(f"{self.location}: chain {chain_id} step {step}: cannot decode image ({e})") from None
        with self._lock:
            self._cache[chain_id] = thumbs
            while len(self._cache) > self._keep:
                self._cache.popitem(last=False)
        return thumbs

    def originals(self, chain_id: str) -> dict[int, bytes | Path]:
        """The chain's images at full size, {step: file path or encoded bytes} (not cached)."""
        if chain_id not in self.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        return self._loader(chain_id)

    def image(self, chain_id: str, step: int) -> Image.Image:
        """The image at `step` of a chain, at display size (longest side `max_side`)."""
        if chain_id not in self.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        thumbs = self._chain(chain_id)
        if step not in thumbs:
            raise Banana100Error(f"chain {chain_id} has no step {step} (it has {min(thumbs)}-{max(thumbs)})")
        return Image.open(io.BytesIO(thumbs[step])).convert("RGB")


def _infos(records: list[dict]) -> dict[str, ChainInfo]:
    by_chain: dict[str, list[dict]] = {}
    for r in records:
        by_chain.setdefault(r["chain_id"], []).append(r)
    out = {}
    for cid, rs in by_chain.items():
        first = rs[0]
        out[cid] = ChainInfo(cid, str(first["source_id"]), str(first["setting"]), int(first["repeat"]),
                             tuple(sorted(int(r["step"]) for r in rs)), first.get("chat_mode"), first.get("variant"))
    return out


def _run_folder(run_dir: Path) -> ChainImages:
    from banana100.chains.manifest import image_path, read_manifest

    records = read_manifest(run_dir)
    paths = {(r["chain_id"], int(r["step"])): image_path(run_dir, r) for r in records}

    def load(chain_id):
        return {s: p.read_bytes() for (c, s), p in paths.items() if c == chain_id}

    return ChainImages(str(run_dir), "run folder", _infos(records), load)


_INDEX_COLUMNS = ["chain_id", "source_id", "setting", "repeat", "chat_mode", "variant", "step"]


def _dataset(location: str, kind: str, fs, files: list[str]) -> ChainImages:
    """Index the record columns of Parquet `files` on filesystem `fs`; read images per chain."""
    from banana100.dataset.reader import index_rows, row_group_images

    records = []
    where: dict[str, list[tuple[int, int, int, int]]] = {}  # chain -> [(file, row group, row in group, step)]
    for fi, g, j, rec in index_rows(files, _INDEX_COLUMNS, fs):
        records.append(rec)
        where.setdefault(rec["chain_id"], []).append((fi, g, j, int(rec["step"])))
    if not records:
        raise DatasetError(f"{location}: the dataset has no rows")

    def load(chain_id):
        out: dict[int, bytes] = {}
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for fi, g, j, step in where.get(chain_id, []):
            groups.setdefault((fi, g), []).append((j, step))
        for (fi, g), rows in sorted(groups.items()):
            images = row_group_images(files[fi], g, fs)
            for j, step in rows:
                data = images[j].as_py()
                if data is None:
                    raise DatasetError(f"{files[fi]}: chain {chain_id} step {step} has no image bytes")
                out[step] = data
        return out

    return ChainImages(location, kind, _infos(records), load)


def _hub_dataset(repo_id: str, cache_dir) -> ChainImages:
    """A Hub dataset in the layout `dataset_script/` writes: its card's `default` config, read remotely."""
    from huggingface_hub import HfFileSystem, hf_hub_download

    from banana100.dataset.layout import CARD_NAME, DEFAULT_CONFIG
    from banana100.dataset.reader import card_configs, config_patterns

    try:
        card = hf_hub_download(repo_id, CARD_NAME, repo_type="dataset",
                               cache_dir=None if cache_dir is None else str(Path(cache_dir) / "hub"))
    except Exception as e:  # noqa: BLE001 - offline, not found, gated: say which
        raise DatasetError(f"cannot read the card of the Hub dataset {repo_id!r} ({type(e).__name__}: {e})") from None
    configs = card_configs(Path(card).parent)
    if not configs:
        raise DatasetError(f"Hub dataset {repo_id!r}: its card has no YAML `configs` (not a Banana100 dataset layout)")
    names = [c["config_name"] for c in configs]
    config = DEFAULT_CONFIG if DEFAULT_CONFIG in names else names[0]
    fs = HfFileSystem()
    root = f"datasets/{repo_id}"
    files: set[str] = set()
    for pattern in config_patterns(configs, config, f"Hub dataset {repo_id!r}"):
        files.update(p for p in fs.glob(f"{root}/{pattern}") if p.endswith(".parquet"))
    if not files:
        raise DatasetError(f"Hub dataset {repo_id!r}: config {config!r} has no Parquet files")
    return _dataset(f"hf://{root}", "Hub dataset", fs, sorted(files))
