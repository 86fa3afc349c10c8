"""The weights store: where every metric's parameter files and checkpoints come from.

A file named in the metric table (`banana100.metrics.table.WeightFile`) is looked for, in this order:

1. `$BANANA100_WEIGHTS/<file>` (one folder, or several joined with `os.pathsep`);
2. the cache of the library that reads it: pyiqa's `torch.hub.get_dir()/pyiqa/<file>`,
   torchvision's `torch.hub.get_dir()/checkpoints/<file>`, CLIP's `torch.hub.get_dir()/clip/<file>`;
3. the Hugging Face cache (`huggingface_hub.try_to_load_from_cache`; timm backbones live there);
4. a download (Hub files with `huggingface_hub`, torchvision and CLIP files from their URL into
   their cache), unless `HF_HUB_OFFLINE=1` is set or the caller passed `allow_download=False`.

When the table knows a file's sha256 (or, for torchvision, the sha256 prefix in its name) it is
checked wherever the file was found. When nothing works, `WeightsNotFoundError` names the file,
the metric, the download URL and where to put it. Nothing here touches the network at import
time; `banana100 weights list | download | check` is the command-line face of this module.

`files_in_place` then puts the files where the library that reads them looks (pyiqa's, torchvision's
and CLIP's caches, timm and Q-Align by patching their loaders while a model is built).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from banana100.errors import WeightsChecksumError, WeightsNotFoundError
from banana100.fileio import sha256_file
from banana100.metrics.table import PYIQA_WEIGHTS_REPO, WeightFile, all_specs, get_metric

ENV_VAR = "BANANA100_WEIGHTS"
_TRUE = {"1", "on", "yes", "true"}


def hub_url(filename: str, repo_id: str = PYIQA_WEIGHTS_REPO) -> str:
    """The Hub URL a file downloads from (the same URL pyiqa uses)."""
    return f"https://huggingface.co/{repo_id}/resolve/main/{filename}"


def weights_dirs() -> list[Path]:
    """The folders named by $BANANA100_WEIGHTS (empty when unset)."""
    value = os.environ.get(ENV_VAR, "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]


def pyiqa_cache_dir() -> Path:
    """pyiqa's download folder, `torch.hub.get_dir()/pyiqa` (follows $TORCH_HOME)."""
    import torch.hub  # imported here: the store itself does not need torch

    return Path(torch.hub.get_dir()) / "pyiqa"


def offline() -> bool:
    """True when HF_HUB_OFFLINE asks for no network (read now, not at import time)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001  # pragma: no cover - huggingface_hub is a dependency
        return False


def _table_file(filename: str, repo_id: str | None = None) -> WeightFile | None:
    """The table's entry for `filename` (the first one, when several metrics share it)."""
    for spec in all_specs().values():
        for wf in spec.all_files:
            if wf.filename == filename and (repo_id is None or wf.repo_id == repo_id):
                return wf
    return None


def _known(filename: str, repo_id: str | None) -> tuple[str | None, list[str]]:
    """(sha256 from the table or None, display names of the metrics that use the file)."""
    sha, users = None, []
    for spec in all_specs().values():
        for wf in spec.all_files:
            if wf.filename == filename and (repo_id is None or wf.repo_id == repo_id):
                sha = sha or wf.sha256
                users.append(spec.display_name)
    return sha, users


def cache_dir(wf: WeightFile) -> Path | None:
    """The folder where the library that reads `wf` looks for it (None: the Hugging Face cache)."""
    import torch.hub

    hub = Path(torch.hub.get_dir())
    return {"pyiqa": hub / "pyiqa", "torch": hub / "checkpoints", "clip": hub / "clip"}.get(wf.cache)


_HASHES: dict[tuple[str, int, int], str] = {}


def sha256_of(path: str | os.PathLike) -> str:
    """sha256 of a file, cached on (path, size, mtime) so large checkpoints hash once."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def _verify(path: Path, filename: str, sha256: str | None, where: str, repo_id: str | None = PYIQA_WEIGHTS_REPO,
            *, prefix: str | None = None, url: str | None = None) -> Path:
    if path.is_dir() or (sha256 is None and prefix is None):
        return path
    actual = sha256_of(path)
    expected = (sha256 or prefix or "").lower()
    if not actual.startswith(expected) or (sha256 is not None and actual != expected):
        what = f"expects {sha256}" if sha256 else f"expects a sha256 starting {prefix} (from the file name)"
        raise WeightsChecksumError(
            f"{filename}: the file at {path} (from {where}) has sha256 {actual}, but the metric "
            f"table {what}. It is corrupt, truncated or a different release: delete it "
            f"and put the right file there (download: {url or hub_url(filename, repo_id or PYIQA_WEIGHTS_REPO)})."
        )
    return path


def _check(path: Path, wf: WeightFile, where: str) -> Path:
    return _verify(path, wf.filename, wf.sha256, where, wf.repo_id, prefix=wf.sha256_prefix, url=wf.download_url)


def _hf_cached(filename: str, repo_id: str | None, snapshot: bool = False) -> Path | None:
    if repo_id is None:
        return None
    try:
        if snapshot:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(repo_id=repo_id, local_files_only=True))
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo_id=repo_id, filename=filename)
    except Exception:  # noqa: BLE001 - a malformed repo id or cache: treat as a miss
        return None
    return Path(hit) if isinstance(hit, str) and os.path.isfile(hit) else None


def hub_unreachable(timeout: float = 3.0, url: str | None = None) -> str:
    """Why the Hub cannot be reached, or "" when its host accepts a TCP connection.

    huggingface_hub retries a failed request five times with back-off (about 30 s) and logs
    each retry; one quick probe first keeps an offline machine from waiting on that. Behind a
    proxy the probe says nothing, so it is skipped.
    """
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return ""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(url or constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return f"download skipped: cannot reach {host}:{port} ({e.strerror or type(e).__name__})"
    return ""


def _download(filename: str, repo_id: str | None, wf: WeightFile | None = None) -> tuple[Path | None, str]:
    """(path, "") on success, (None, reason) on failure; never raises, never prints a trace."""
    try:
        if wf is not None and wf.url:  # torchvision / CLIP: straight into the reading library's cache
            reason = hub_unreachable(url=wf.url)
            if reason:
                return None, reason
            import torch.hub

            target = cache_dir(wf) / wf.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            torch.hub.download_url_to_file(wf.url, str(target), hash_prefix=wf.sha256_prefix, progress=True)
            return target, ""
        reason = hub_unreachable()
        if reason:
            return None, reason
        if wf is not None and wf.snapshot:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(repo_id=repo_id, etag_timeout=10)), ""
        from huggingface_hub import hf_hub_download

        remote = wf.remote_name if wf is not None and wf.remote_name else filename
        return Path(hf_hub_download(repo_id=repo_id, filename=remote, etag_timeout=10)), ""
    except Exception as e:  # noqa: BLE001 - offline, DNS, 404, gated repo...: report, don't trace
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"download failed ({type(e).__name__}: {first_line[:200]})"


def resolve(
    filename: str,
    repo_id: str | None = PYIQA_WEIGHTS_REPO,
    allow_download: bool | None = None,
    *,
    sha256: str | None = None,
    metric: str | None = None,
) -> Path:
    """Return a local path to `filename`, downloading it only when allowed.

    No download happens when HF_HUB_OFFLINE=1 or `allow_download=False` (`None`, the
    default, and `True` both mean "download when online"). `sha256` defaults to the
    table's value for the file; `metric` only improves the error message. A file the table
    knows is looked for where its own library keeps it (see `resolve_file`).
    """
    wf = _table_file(filename, repo_id) or _table_file(filename)
    if wf is None or (repo_id is not None and wf.repo_id not in (None, repo_id)):
        wf = WeightFile(filename, repo_id=repo_id)
    if sha256:
        from dataclasses import replace

        wf = replace(wf, sha256=sha256)
    return resolve_file(wf, allow_download, metric=metric)


def resolve_file(wf: WeightFile, allow_download: bool | None = None, *, metric: str | None = None) -> Path:
    """Return a local path to the table's file `wf` (a folder for a whole-repo snapshot)."""
    filename, repo_id = wf.filename, wf.repo_id
    _, users = _known(filename, repo_id)
    if metric is not None:
        users = [get_metric(metric).display_name]
    looked: list[str] = []

    dirs = weights_dirs()
    for d in dirs:
        p = d / filename
        if p.is_file() or (wf.snapshot and p.is_dir()):
            return _check(p, wf, f"${ENV_VAR}")
    looked.append(f"${ENV_VAR} ({os.pathsep.join(map(str, dirs))})" if dirs else f"${ENV_VAR} (not set)")

    cdir = cache_dir(wf)
    if cdir is not None:
        p = cdir / filename
        if p.is_file():
            return _check(p, wf, f"{wf.cache}'s cache" if wf.cache != "pyiqa" else "pyiqa's cache")
        looked.append(f"pyiqa's cache ({cdir})" if wf.cache == "pyiqa" else f"the {wf.cache} cache ({cdir})")

    p = _hf_cached(wf.remote_name or filename, repo_id, wf.snapshot)
    if p is not None:
        return _check(p, wf, "the Hugging Face cache")
    if repo_id is not None:
        looked.append(f"the Hugging Face cache (repo {repo_id})")

    if allow_download is False:
        why_not = "download not allowed (allow_download=False)"
    elif offline():  # HF_HUB_OFFLINE=1 wins even over allow_download=True
        why_not = "download skipped: HF_HUB_OFFLINE=1"
    else:
        p, why_not = _download(filename, repo_id, wf)
        if p is not None:
            return _check(p, wf, "a fresh download")

    who = " and ".join(users) if users else "a metric"
    where = f"${ENV_VAR}/{filename}" + (f" ({dirs[0] / filename})" if dirs else "")
    if cdir is not None:
        where += f" or {cdir / filename}"
    err = WeightsNotFoundError(
        f"{filename}{' folder' if wf.snapshot else ''} ({who}) not found ({why_not}{'' if dirs else f'; ${ENV_VAR} not set'}). "
        f"Put it at {where}, from {wf.download_url}; or, online: `banana100 weights download {metric or '<metric>'}`."
    )
    err.missing = [(wf, where)]  # for one message per metric (MetricFilesMissing)
    err.why_not = why_not
    raise err


def metric_files_missing(metric: str, errors: list[WeightsNotFoundError]) -> WeightsNotFoundError:
    """One error naming every missing file of `metric` (from the per-file errors, in table order)."""
    if len(errors) == 1:
        return errors[0]
    spec = get_metric(metric)
    parts = [f"{wf.filename} (from {wf.download_url})" for e in errors for wf, _ in getattr(e, "missing", [])]
    reasons = sorted({getattr(e, "why_not", "") for e in errors} - {""})
    dirs = weights_dirs()
    err = WeightsNotFoundError(
        f"{spec.display_name} ({spec.name}) lacks {len(errors)} files ({'; '.join(reasons)}): " + ", ".join(parts)
        + f". Put them in ${ENV_VAR}{f' ({dirs[0]})' if dirs else ''} (or its library's cache: `banana100 weights "
        f"list {spec.name} -v`), or, online: `banana100 weights download {spec.name}`."
    )
    err.missing = [m for e in errors for m in getattr(e, "missing", [])]
    err.why_not = "; ".join(reasons)
    return err


def _resolve_file(wf: WeightFile, metric: str, allow_download: bool | None) -> Path:
    return resolve_file(wf, allow_download, metric=metric)


def resolved_files(metric: str, allow_download: bool | None = None, backend: str | None = None
                   ) -> list[tuple[WeightFile, Path]]:
    """(table entry, local path) of every file `metric` needs with `backend` (default: its default), in table order."""
    spec = get_metric(metric)
    found, errors = [], []
    for wf in spec.backend_files(backend):
        try:
            found.append((wf, _resolve_file(wf, metric, allow_download)))
        except WeightsChecksumError:  # a wrong file is its own problem: say it alone
            raise
        except WeightsNotFoundError as e:  # go on: one error names every missing file of the metric
            errors.append(e)
    if errors:
        raise metric_files_missing(metric, errors)
    return found


def files_for(metric: str, allow_download: bool | None = None, backend: str | None = None) -> list[Path]:
    """Local paths of every file `metric` needs with `backend`, in table order (downloads unless offline)."""
    return [path for _, path in resolved_files(metric, allow_download, backend)]


def is_available(metric: str, allow_download: bool = False, backend: str | None = None) -> bool:
    """True when every file of `metric` (with `backend`) is present (and, with allow_download, fetchable)."""
    try:
        files_for(metric, allow_download=allow_download, backend=backend)
    except WeightsNotFoundError:
        return False
    return True


def missing(metric: str, backend: str | None = None) -> list[str]:
    """File names of `metric` (with `backend`) that are not available locally (no download is tried)."""
    out = []
    for wf in get_metric(metric).backend_files(backend):
        try:
            _resolve_file(wf, metric, allow_download=False)
        except WeightsNotFoundError:
            out.append(wf.filename)
    return out


def missing_by_metric(metrics: Sequence[str], backend: str | None = None) -> dict[str, list[str]]:
    """{metric: its files not available locally} for the metrics that lack any (no download)."""
    out = {}
    for m in metrics:
        absent = missing(m, backend)
        if absent:
            out[m] = absent
    return out


# -- staging: files where the libraries that read them look ------------------------------


def _link_into(folder: Path, paths: Sequence[Path]) -> None:
    """Link (or copy) files into `folder` unless a file of that name is already there."""
    if not paths:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for p in paths:
        target = folder / p.name
        if target.exists():
            continue
        if target.is_symlink():  # a dangling link from an earlier run
            target.unlink()
        try:
            os.symlink(Path(p).resolve(), target)
        except OSError:
            import shutil

            shutil.copyfile(p, target)


def stage_in_pyiqa_cache(paths: Sequence[Path]) -> None:
    """Link files into pyiqa's download folder, for archs that only look there.

    Only for files a pyiqa arch cannot take as a path argument (metric without `path_kwarg`,
    or a second file); pyiqa would download them to the same place itself.
    """
    if not paths:
        return
    from pyiqa.utils.download_util import DEFAULT_CACHE_DIR

    _link_into(Path(DEFAULT_CACHE_DIR), paths)


@contextmanager
def files_in_place(pairs: Sequence[tuple[WeightFile, Path]]):
    """Put each (table file, local path) where the library that reads it will look, for a build.

    pyiqa, torchvision and CLIP files are linked into their caches under `torch.hub.get_dir()`
    (the places those libraries download to), renamed to the name they expect. timm backbones
    and the Q-Align snapshot are handed over by patching, only while the block runs:
    `timm.create_model(..., pretrained=True)` gets `pretrained_cfg_overlay={"file": path}`, and
    Q-Align's `from_pretrained("q-future/one-align")` gets the local folder. Not thread-safe:
    build scorers from one thread.
    """
    from contextlib import ExitStack
    from unittest import mock

    by_cache: dict[str, list[Path]] = defaultdict(list)
    timm_files: dict[str, Path] = {}
    snapshots: dict[str, Path] = {}
    for wf, path in pairs:
        if wf.snapshot:
            snapshots[wf.repo_id] = path
        elif wf.timm_name:
            timm_files[wf.timm_name] = path
        else:
            by_cache[wf.cache].append(path)
    if by_cache.get("pyiqa"):
        stage_in_pyiqa_cache(by_cache["pyiqa"])
    for cache in ("torch", "clip"):
        if by_cache.get(cache):
            _link_into(cache_dir(WeightFile("x", cache=cache)), by_cache[cache])
    with ExitStack() as stack:
        if timm_files:
            import timm

            original = timm.create_model

            def create_model(model_name, pretrained=False, **kwargs):
                if pretrained and model_name in timm_files:
                    overlay = dict(kwargs.pop("pretrained_cfg_overlay", None) or {})
                    overlay["file"] = str(timm_files[model_name])
                    kwargs["pretrained_cfg_overlay"] = overlay
                return original(model_name, pretrained=pretrained, **kwargs)

            stack.enter_context(mock.patch.object(timm, "create_model", create_model))
        if snapshots:
            from pyiqa.archs import qalign_arch

            for cls_name in ("MPLUGOwl2LlamaForCausalLM", "CLIPImageProcessor"):
                cls = getattr(qalign_arch, cls_name)
                orig = cls.from_pretrained

                def from_pretrained(name, *args, _orig=orig, **kwargs):
                    return _orig(str(snapshots.get(str(name), name)), *args, **kwargs)

                stack.enter_context(mock.patch.object(cls, "from_pretrained", from_pretrained))
        yield
