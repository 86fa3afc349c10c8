"""The original release (kenantang/Banana100), read one chain at a time: where it is and how its
file paths name chains and steps (`ReleaseSpec`, `ORIGINAL_RELEASE`), and its chains listed up
front, fetched and imported when shown (`ReleaseChains`)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from banana100 import about
from banana100.errors import Banana100Error, DatasetError
from banana100.explore.common import DISPLAY_SIDE, RELEASE_ENV, RELEASE_PATTERN_ENV
from banana100.explore.sources import ChainImages, ChainInfo


@dataclass(frozen=True)
class ReleaseSpec:
    """Where the original Banana100 release is and how its file paths name chains and steps.

    `location`: a Hub dataset id (`owner/name`), an `hf://datasets/owner/name` URL, or a local
    folder laid out like the Hub repository (a stand-in for tests, or a downloaded copy).
    `pattern`: a `banana100 import-chains` pattern (`banana100.chains.importer`), relative to the
    repository root. `scores`: paths in the repository of a published scores table in the
    `banana100 score` format (first one found is used; none: scores are computed on demand).
    """

    location: str
    pattern: str
    model: str = "gemini-3-pro-image-preview"
    scores: tuple[str, ...] = ("scores.parquet", "scores/scores.parquet")

    @property
    def url(self) -> str:
        text = self.location.strip()
        if "://" in text or text.startswith((".", "/")) or Path(text).exists():
            return text
        if text.count("/") == 1:
            return f"hf://datasets/{text}"
        raise DatasetError(f"{text!r}: not a Hub dataset id (owner/name), an hf:// URL or a folder")

    @classmethod
    def from_env(cls, env=None) -> ReleaseSpec:
        env = os.environ if env is None else env
        return cls(location=(env.get(RELEASE_ENV) or "").strip() or ORIGINAL_RELEASE.location,
                   pattern=(env.get(RELEASE_PATTERN_ENV) or "").strip() or ORIGINAL_RELEASE.pattern,
                   model=ORIGINAL_RELEASE.model, scores=ORIGINAL_RELEASE.scores)


#: The original release, in this ONE place (override with BANANA100_SPACE_RELEASE and
#: BANANA100_SPACE_RELEASE_PATTERN). ASSUMPTION: the Hub could not be reached when this was
#: written and no public listing of the repository's files was found, so the layout below (one
#: image file per step, `{setting}/{source}/rep{repeat}/img_{step:03d}.png`, step 0 = the
#: source) is our guess; change the pattern here when the real layout is known. A release in
#: the Parquet layout `dataset_script/` writes is read by `ChainImages.open("owner/name")` instead.
ORIGINAL_RELEASE = ReleaseSpec(
    location=about.ORIGINAL_DATASET,
    pattern="{setting}/{source}/rep{repeat}/img_{step:03d}.png",
)


class ReleaseChains(ChainImages):
    """Chains of a release folder (on the Hub or local): listed up front, fetched per chain.

    The file listing is grouped into chains by `importer.plan_chains` (the same rules as
    `banana100 import-chains`); nothing is downloaded until a chain is shown. Then that chain's
    files are copied into `<cache>/files/` (the repository's own paths) and imported with
    `importer.import_chains` into the run folder `<cache>/run/` (checked images, SHA-256, parent
    links), from which they are shown and scored.
    """

    def __init__(self, spec: ReleaseSpec, cache_dir: str | os.PathLike, keep: int = 4, max_side: int = DISPLAY_SIDE):
        import fsspec

        from banana100.chains.importer import plan_chains

        from banana100.errors import ImportChainsError

        self.spec = spec
        url = spec.url
        try:
            if url.startswith("hf://"):  # the Hub, through huggingface_hub's own filesystem
                import huggingface_hub

                self.fs, self.root = huggingface_hub.HfFileSystem(), url[len("hf://"):]
            else:
                self.fs, self.root = fsspec.core.url_to_fs(url)
            if not self.fs.exists(self.root):
                raise FileNotFoundError("no such repository or folder")
            listing = self.fs.find(self.root)
        except Exception as e:  # noqa: BLE001 - offline, not found, gated: say which
            raise DatasetError(f"cannot list the release {url} ({type(e).__name__}: {e})") from None
        root = self.root.rstrip("/") + "/"
        self.rel_paths = sorted(p[len(root):] for p in listing if p.startswith(root))
        try:
            plan = plan_chains(self.rel_paths, spec.pattern, model=spec.model)
        except ImportChainsError as e:
            raise DatasetError(f"release {url}: {e}") from None
        if not plan.chains:
            raise DatasetError(f"release {url}: none of its {len(self.rel_paths)} files matches the pattern "
                               f"{spec.pattern!r}; set {RELEASE_PATTERN_ENV} to the layout of its files")
        self.plan = plan
        key = "".join(c if c.isalnum() or c in "._-" else "_" for c in url)
        self.cache = Path(cache_dir) / "release" / key
        self.files_dir, self.run_dir = self.cache / "files", self.cache / "run"
        self._fetch_lock = threading.Lock()
        infos = {cid: ChainInfo(cid, c.source_id, c.setting, c.repeat, tuple(sorted(c.files)), c.chat_mode, c.variant)
                 for cid, c in plan.chains.items()}
        super().__init__(url, "original release", infos, self._load, keep=keep, max_side=max_side)

    def published_scores(self) -> Path | None:
        """The release's own scores file (`spec.scores`), downloaded into the cache; None when absent."""
        for rel in self.spec.scores:
            if rel in self.rel_paths:
                target = self.cache / "published" / rel
                if not target.is_file():
                    self._get(rel, target)
                return target
        return None

    def _get(self, rel: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        try:
            self.fs.get_file(f"{self.root.rstrip('/')}/{rel}", str(tmp))
        except Exception as e:  # noqa: BLE001
            tmp.unlink(missing_ok=True)
            raise DatasetError(f"cannot download {rel} from {self.location} ({type(e).__name__}: {e})") from None
        tmp.replace(target)

    def fetch(self, chain_id: str, progress=None) -> dict[int, Path]:
        """Download and import one chain (once); {step: image file in the run folder}."""
        from banana100.chains.importer import import_chains
        from banana100.chains.manifest import MANIFEST_NAME, image_path, read_manifest

        if chain_id not in self.plan.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        files = self.plan.chains[chain_id].files
        with self._fetch_lock:  # one import at a time: they share the run folder's manifest
            todo = [rel for rel in files.values() if not (self.files_dir / rel).is_file()]
            for i, rel in enumerate(todo):
                if progress is not None:
                    progress(i / len(todo), f"downloading {chain_id}: {i} of {len(todo)} images")
                self._get(rel, self.files_dir / rel)
            records = read_manifest(self.run_dir) if (self.run_dir / MANIFEST_NAME).is_file() else []
            have = {int(r["step"]) for r in records if r["chain_id"] == chain_id}
            if not set(files) <= have:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # gaps are shown as they are
                    import_chains(self.files_dir, self.spec.pattern, self.run_dir, model=self.spec.model, link=True)
                records = read_manifest(self.run_dir)
        return {int(r["step"]): image_path(self.run_dir, r) for r in records if r["chain_id"] == chain_id}

    def _load(self, chain_id: str) -> dict[int, bytes]:
        return {step: p.read_bytes() for step, p in self.fetch(chain_id).items()}

    def originals(self, chain_id: str) -> dict[int, bytes | Path]:
        return dict(self.fetch(chain_id))
