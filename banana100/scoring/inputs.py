"""What `banana100 score` reads: a run folder, a dataset folder or plain image files, as items
whose bytes are checked against the manifest's sha256.

A plain image is named in one canonical form (`canonical_image_path`: absolute, its folder's
symlinks and `..` resolved, its own file name kept), so `g/a.png`, `./g/a.png` and `g/../g/a.png`
are one image, from whichever folder `score` runs; its rows are keyed by that path and its bytes'
sha256 (`banana100.scoring.store`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from banana100.chains.manifest import MANIFEST_NAME, image_path, read_manifest
from banana100.errors import Banana100Error, DatasetError, ImageReadError, ManifestError
from banana100.fileio import read_regular_bytes, sha256_bytes


@dataclass
class ImageItem:
    """One image to score: its manifest fields and how to read its bytes."""

    record: dict
    name: str  # file path (run folder) or dataset path, for messages
    read: Callable[[], bytes]


def image_files(sources) -> list[Path] | None:
    """The image files named by `sources` (files, folders searched recursively, glob patterns),
    in the order given (each folder's and pattern's files sorted); None when `sources` is a run
    or dataset folder (scored as chains). A named file that is not an image, or a folder or
    pattern with no image, is an error naming it, before any work."""
    from banana100.dataset.reader import is_dataset_dir
    from banana100.imageio import IMAGE_SUFFIXES

    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if len(items) == 1 and Path(items[0]).is_dir() and (
            (Path(items[0]) / MANIFEST_NAME).is_file() or is_dataset_dir(Path(items[0]))):
        return None
    found: list[Path] = []
    kinds = ", ".join(IMAGE_SUFFIXES)
    for item in items:
        path = Path(item)
        if path.is_dir():
            if (path / MANIFEST_NAME).is_file() or is_dataset_dir(path):
                raise DatasetError(f"{path} is a run or dataset folder: score it on its own, not with other images")
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DatasetError(f"{path} is neither a run folder (no {MANIFEST_NAME}), a dataset folder (no "
                                   f"README.md with configs) nor a folder of images (none ending in {kinds})")
            found += files
        elif path.is_file():
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                raise DatasetError(f"{path}: not an image file (expected one ending in {kinds})")
            found.append(path)
        elif any(c in str(item) for c in "*?["):
            import glob

            files = sorted(Path(p) for p in glob.glob(str(item), recursive=True)
                           if Path(p).is_file() and Path(p).suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DatasetError(f"{item}: the pattern matches no image file (ending in {kinds})")
            found += files
        else:
            raise DatasetError(f"{path}: no such file or folder")
    # a file named twice (by name and by a pattern, or in two forms) is scored once
    return list(dict.fromkeys(Path(canonical_image_path(p)) for p in found))


def canonical_image_path(path: str | os.PathLike) -> str:
    """The one form of a plain image's path (the `image` column, part of its rows' key): absolute,
    with its folder resolved (symlinks, `.`, `..`) but its own name kept, so that a file linked
    from a cache keeps a readable name. A relative path is taken from the current folder."""
    path = Path(path) if Path(path).is_absolute() else Path.cwd() / path
    return str(path.parent.resolve() / path.name)  # `..` after the folder's symlinks, as the system reads it


def plain_scope(sources) -> list[str]:
    """The folders whose images this run lists in full (folders named, and the fixed leading
    folder of each glob pattern), canonical: a scored image in one of them that is gone from disk
    is stale (`banana100.scoring.store.drop_stale_plain_rows`). Files named one by one add none."""
    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    folders = []
    for item in items:
        if Path(item).is_dir():
            folders.append(str(Path(item).resolve()))
        elif any(c in str(item) for c in "*?["):
            parts = Path(item).parts
            fixed = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
            folders.append(str(Path(*parts[:fixed]).resolve()) if fixed else str(Path.cwd().resolve()))
    return folders


def source_ids(source) -> tuple[str, set]:
    """What names this run's images in a scores file: ("image", their canonical paths) for plain images,
    ("chain_id", the chain ids) for a run or dataset folder (its manifest, or the dataset's metadata
    columns: no image is read)."""
    files = image_files(source)
    if files is not None:
        return "image", {str(p) for p in files}
    root = Path(source if isinstance(source, (str, os.PathLike)) else list(source)[0])
    if (root / MANIFEST_NAME).is_file():
        return "chain_id", {r["chain_id"] for r in read_manifest(root)}
    from banana100.dataset.reader import dataset_files, iter_file_batches

    ids: set = set()
    for path in dataset_files(root):
        for _, records, _ in iter_file_batches(path, ("chain_id",), with_images=False):
            ids.update(r["chain_id"] for r in records)
    return "chain_id", ids


def with_sha256(item: ImageItem) -> ImageItem:
    """A plain image with the sha256 of its bytes in its record (read once, kept for the decode):
    its rows are keyed by path and bytes, so a changed file is scored again. Other items, and an
    unreadable file (its read fails again where the error is recorded), come back as they are."""
    if item.record.get("chain_id") is not None or item.record.get("sha256"):
        return item
    try:
        data = item.read()
    except (Banana100Error, OSError):
        return item
    return ImageItem({**item.record, "sha256": sha256_bytes(data)}, item.name, lambda: data)


@dataclass
class Source:
    """What `score` reads, classified once: a run folder, a dataset folder, or plain image files
    (`files`, the folders and patterns walked once), with the number of images and their items."""

    given: object  # as the caller named it: a path, or a list of paths and patterns
    files: list[Path] | None  # the plain image files; None: a run or dataset folder (chains)
    total: int
    _items: Callable[[], Iterator[ImageItem]]

    @classmethod
    def of(cls, source) -> "Source":
        """`source` classified and checked (an error naming what is wrong, before any work)."""
        if isinstance(source, Source):
            return source
        files = image_files(source)
        total, items = _items_of(source, files)
        return cls(source, files, total, items)

    @property
    def chains(self) -> bool:
        """A run or dataset folder: its images are chain steps, each with its chain's step 0."""
        return self.files is None

    def items(self) -> Iterator[ImageItem]:
        """The images, in order (a new iterator each call)."""
        return self._items()

    def scope(self) -> list[str]:
        """The folders whose plain images this run lists in full (`plain_scope`); [] for chains."""
        return [] if self.chains else plain_scope(self.given)

    def folder(self) -> Path:
        """The run or dataset folder (chains only)."""
        return Path(self.given if isinstance(self.given, (str, os.PathLike)) else list(self.given)[0])


def iter_items(source) -> tuple[int, Iterator[ImageItem]]:
    """(number of images, iterator of images) of a run folder, a dataset folder, or plain images
    (a folder, a list or a glob of image files: one item each, with no chain or step)."""
    source = Source.of(source)
    return source.total, source.items()


def _items_of(source, files: list[Path] | None) -> tuple[int, Callable[[], Iterator[ImageItem]]]:
    """(number of images, a maker of their iterator) for `source`, whose plain `files` are known."""
    if files is not None:
        def plain_items():
            for path in files:
                yield ImageItem({"image": str(path)}, str(path), lambda path=path: read_regular_bytes(path))

        return len(files), plain_items
    source = Path(source if isinstance(source, (str, os.PathLike)) else list(source)[0])
    if (source / MANIFEST_NAME).is_file():
        records = read_manifest(source)
        if not records:  # it scored to a 0-row file without a word
            raise ManifestError(f"{source / MANIFEST_NAME}: lists no image, so there is nothing to score (is it the "
                                "run folder you meant? an interrupted `generate` resumes into it)")
        # image_path refuses a path that leaves the run folder (the rule build-dataset uses too)
        missing = [str(p) for p in (image_path(source, r) for r in records) if not p.exists()]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ManifestError(f"{source / MANIFEST_NAME} lists images that are not on disk: {', '.join(missing[:5])}{more}")

        def run_items():
            for r in records:
                path = image_path(source, r)
                yield ImageItem(r, str(path), lambda path=path, r=r: _checked(read_regular_bytes(path), r))

        return len(records), run_items

    from banana100.dataset.reader import count_dataset_rows, is_dataset_dir, iter_dataset_records

    if is_dataset_dir(source):
        _check_no_step_twice(source)

        def dataset_items():
            for record, data in iter_dataset_records(source):
                yield ImageItem(record, f"{source}:{record.get('image') or record['chain_id']}/step {record['step']}",
                                lambda data=data, record=record: _checked(data, record))

        rows = count_dataset_rows(source)
        if not rows:
            raise DatasetError(f"{source}: the dataset holds no image, so there is nothing to score")
        return rows, dataset_items
    if not source.exists():
        raise Banana100Error(f"{source}: no such folder")
    raise DatasetError(f"{source} is neither a run folder (no {MANIFEST_NAME}) nor a dataset folder (no README.md with configs)")


def _check_no_step_twice(source: Path) -> None:
    """A dataset's shards checked before any image is scored (metadata columns only): a chain step found
    twice (a shard copied twice) was scored in full, then refused at the merge, and again at every rerun."""
    from banana100.dataset.verify import duplicated_steps

    doubled = duplicated_steps(source)
    if doubled:
        first = doubled[0]
        example = f"chain {first.chain_id!r} step {first.step} {first.message.removeprefix('step ')}"
        raise DatasetError(f"{source}: {len(doubled)} row(s) repeat a chain step, e.g. {example}: a data file "
                           f"copied twice? Remove the copy (`banana100 verify {source}` checks the whole folder); "
                           "nothing was scored")


def _checked(data: bytes, record: dict) -> bytes:
    """The image bytes, if they are the ones the manifest (or dataset row) recorded."""
    digest = sha256_bytes(data)
    if record.get("sha256") and digest != record["sha256"]:
        raise ImageReadError(f"its sha256 is {digest[:16]}..., the manifest says {str(record['sha256'])[:16]}...: the "
                             "file changed after it was recorded; not scored")
    return data
