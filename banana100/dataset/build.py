"""Build a Hub-ready Banana100 dataset folder from run folders.

    build_dataset([Path("runs/a"), Path("runs/b")], Path("banana100-dataset"), num_proc=4)

reads the run folders and checks every image (`checks`), writes the chains of each setting and
editor model, and the endpoint steps, as Parquet shards (`shards`), then the card (`card`), in
the layout that `datasets.load_dataset(folder)` loads exactly as it would from the Hub
(`layout`). Images are embedded untouched: the `image` column is the `datasets.Image()` struct
`{bytes, path}` with the file's original bytes and its path in the run folder
(`<chain_id>/step_000.png`). The setting and model configs are views of the same files, so only
`endpoints` costs extra storage.

The folder is built in `.<name>.building` next to `out_dir` and moved into place at the end, so
a failed build never leaves half a dataset at `out_dir`. Rebuilding into an earlier build
replaces only the build's own entries (README.md, data/, endpoints/) and keeps everything else
(a `.git` clone of the Hub repo, `.gitattributes`, notes: docs/data-safety.md); a folder that is
not a dataset is refused. A lock (`.<name>.lock` beside it) refuses a second build at once; an interrupted build is
resumed by running it again: finished shards whose rows are unchanged are reused, and the
images already checked (unchanged since, by size and modification time) are not decoded again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from banana100.dataset.card import ConfigStats, provenance, read_source_licences, write_card
from banana100.dataset.checks import Item, check_images, collect_items, stat_key
from banana100.dataset.layout import (
    CARD_NAME,
    DATA_DIR,
    DEFAULT_CONFIG,
    ENDPOINT_STEPS,
    ENDPOINTS_CONFIG,
    ENDPOINTS_DIR,
    SHARD_MAX_BYTES,
    chain_models,
    dataset_features,
    model_config,
    model_slug,
)
from banana100.dataset.reader import is_dataset_dir
from banana100.dataset.shards import JOURNAL_NAME, finalize_shards, write_error, write_group
from banana100.errors import DatasetError
from banana100.fileio import ExclusiveLock, fsync_dir
from banana100.workers import process_pool

_CHECKED = ".checked-images"  # images an interrupted build checked (see `check_images`)


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise DatasetError(f"{out_dir} exists and is not a folder; choose another --out")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not is_dataset_dir(out_dir):
        raise DatasetError(
            f"{out_dir} exists and is not a dataset folder from an earlier build; refusing to overwrite it "
            "(choose another --out or remove it)"
        )


def build_dataset(run_dirs: list[Path], out_dir: Path, shard_max_bytes: int = SHARD_MAX_BYTES,
                  num_proc: int | None = None, licence: str | None = None,
                  source_licences: str | os.PathLike | dict | None = None,
                  source_datasets: list[str] | None = None, repo_id: str | None = None) -> Path:
    """Build the Hub-ready dataset folder `out_dir` from run folders; return `out_dir`.

    Every image is checked before anything is written; the folder appears at `out_dir` only
    when complete (an earlier dataset build there has its own entries replaced and keeps
    everything else; any other non-empty folder is refused).
    The work happens in `.<out_dir name>.building` next to it: an interrupted build (Ctrl-C,
    a crash, a full disk) is resumed by running the same command again, and every finished
    shard whose rows are unchanged is reused. `num_proc` > 1 checks images and writes the data
    folders (one per setting x editor model) in that many processes.

    The card states the licence and sources of the images (`provenance`): `source_datasets`
    names the Hub release imported chains come from (its licence applies), `source_licences`
    ({source_id: licence} or a YAML file) the licences of the builder's own source images,
    `licence` overrides the Hub licence id; `repo_id` is the Hub id of the card's loading lines.
    """
    import datasets  # noqa: F401 - fail early with a clear ImportError

    out_dir = Path(out_dir)
    run_dirs = [Path(p) for p in run_dirs]
    if shard_max_bytes < 64 * 1024:
        raise DatasetError(f"shard_max_bytes={shard_max_bytes} is too small (at least 64 KiB)")
    if num_proc is not None and num_proc < 1:
        raise DatasetError(f"num_proc={num_proc} must be at least 1")
    _check_out_dir(out_dir)
    for run_dir in run_dirs:
        if out_dir.resolve() == run_dir.resolve() or out_dir.resolve() in run_dir.resolve().parents:
            raise DatasetError(f"--out {out_dir} must not be a run folder or contain one ({run_dir})")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # the same kind of lock as `generate`: a second build into the same folder refuses at once
    with ExclusiveLock(out_dir.parent / f".{out_dir.name}.lock", out_dir, "banana100 build-dataset", remove=True):
        return build_locked(run_dirs, out_dir, shard_max_bytes, num_proc, licence, source_licences,
                             source_datasets, repo_id)


def build_locked(run_dirs: list[Path], out_dir: Path, shard_max_bytes: int, num_proc: int | None,
                  licence: str | None, source_licences, source_datasets: list[str] | None,
                  repo_id: str | None) -> Path:
    _check_out_dir(out_dir)  # again, now that no other build can be writing it
    _refuse_foreign_files(out_dir)  # before the long part, not after it

    licences = read_source_licences(source_licences)  # a bad file fails before the long part
    if repo_id is not None and (repo_id.count("/") != 1 or not all(repo_id.split("/"))):
        raise DatasetError(f"--repo-id {repo_id!r}: expected ORG/NAME")
    items = collect_items(run_dirs)
    models = chain_models((it.record["chain_id"], it.record["step"], it.record["model"]) for it in items)
    configs_of_models = _model_configs(sorted(set(models.values())), {it.record["setting"] for it in items})
    # A fixed name, so that the next run finds and resumes an interrupted build.
    tmp = out_dir.parent / f".{out_dir.name}.building"
    checked = tmp / _CHECKED
    known = set(checked.read_text(encoding="utf-8").splitlines()) if checked.is_file() else set()
    check_images(items, workers=num_proc, processes=bool(num_proc and num_proc > 1), already_checked=known)

    tmp.mkdir(exist_ok=True)  # a plain mkdir (not mkdtemp, whose 0700 mode would stay) honours the umask
    _write_text(tmp / ".banana100-build", "a banana100 build-dataset work folder; safe to delete\n")
    _write_text(checked, "".join(f"{k}\n" for k in map(stat_key, items) if k))

    jobs = _jobs(items, models, configs_of_models)
    # Leftovers of an earlier attempt on other data (a setting since removed...) go.
    wanted = {folder for _, folder, _ in jobs}
    for d in (tmp / DATA_DIR).glob("*/*") if (tmp / DATA_DIR).is_dir() else []:
        if f"{DATA_DIR}/{d.parent.name}/{d.name}" not in wanted:
            shutil.rmtree(d)
    if ENDPOINTS_DIR not in wanted:
        shutil.rmtree(tmp / ENDPOINTS_DIR, ignore_errors=True)

    args = [(group, tmp / folder, shard_max_bytes, folder) for group, folder, _ in jobs]
    if num_proc and num_proc > 1 and len(args) > 1:
        with process_pool(min(num_proc, len(args))) as pool:
            results = list(pool.map(write_group, args))
    else:
        results = [write_group(a) for a in args]

    stats: dict[str, ConfigStats] = {DEFAULT_CONFIG: ConfigStats()}
    for (_, folder, names), (rows, nbytes, sizes) in zip(jobs, results, strict=True):
        finalize_shards(tmp / folder)
        for name in names:
            st = stats.setdefault(name, ConfigStats())
            st.num_rows += rows
            st.num_bytes += nbytes
            st.download_size += sum(sizes)
            st.files += len(sizes)
    for journal in tmp.rglob(JOURNAL_NAME):
        journal.unlink()
    checked.unlink()
    (tmp / ".banana100-build").unlink()
    records = [it.record for it in items]
    facts = provenance(records, licence, licences, source_datasets)
    try:
        write_card(tmp, records, stats, dataset_features(), shard_max_bytes, model_configs=configs_of_models,
                   provenance_facts=facts, repo_id=repo_id)
    except OSError as e:
        raise write_error(e, tmp / CARD_NAME) from None
    _replace_dir(tmp, out_dir)
    return out_dir


def _write_text(path: Path, text: str) -> None:
    """A small file of the work folder; a full disk names it (a file's flush at close names none)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise write_error(e, path) from None


def _model_configs(models: list[str], settings: set[str]) -> dict[str, str]:
    """{editor model: its config name}; two models or a setting with the same name are refused."""
    configs: dict[str, str] = {}
    for m in models:
        name = model_config(m)
        if name in configs.values():
            other = next(k for k, v in configs.items() if v == name)
            raise DatasetError(f"editor models {other!r} and {m!r} both map to the config name {name!r}")
        configs[m] = name
    clash = settings & set(configs.values())
    if clash:
        raise DatasetError(f"setting names {sorted(clash)} clash with the per-model config names")
    return configs


def _jobs(items: list[Item], models: dict[str, str],
          configs_of_models: dict[str, str]) -> list[tuple[list[Item], str, list[str]]]:
    """(items, data folder, the configs whose sizes they count in) for every folder to write:
    one per setting x editor model, and `endpoints` when any chain has an endpoint step."""
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in items:
        groups[(it.record["setting"], models[it.record["chain_id"]])].append(it)
    jobs = [(g, f"{DATA_DIR}/{s}/{model_slug(m)}", [DEFAULT_CONFIG, s, configs_of_models[m]])
            for (s, m), g in groups.items()]
    endpoint_items = [it for it in items if it.record["step"] in ENDPOINT_STEPS]
    if endpoint_items:
        jobs.append((endpoint_items, ENDPOINTS_DIR, [ENDPOINTS_CONFIG]))
    return jobs


OWN_ENTRIES = (CARD_NAME, DATA_DIR, ENDPOINTS_DIR)  # what a build writes in its folder; nothing else is touched


def _foreign_files(target: Path) -> list[Path]:
    """Files inside the build's own folders (data/, endpoints/) that no build wrote (not Parquet)."""
    found = []
    for name in (DATA_DIR, ENDPOINTS_DIR):
        folder = target / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            found.append(folder)
        elif folder.is_dir():
            found += [p for p in sorted(folder.rglob("*")) if not p.is_dir() and p.suffix != ".parquet"]
    return found


def _refuse_foreign_files(target: Path) -> None:
    foreign = _foreign_files(target)
    if foreign:
        more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
        raise DatasetError(f"{', '.join(map(str, foreign[:3]))}{more}: not written by build-dataset, inside the "
                           "folders a rebuild replaces; move it out of the way (nothing was changed)")


def _replace_dir(new: Path, target: Path) -> None:
    """Move the finished build `new` to `target`. Into an earlier build, only the build's own
    entries (README.md, data/, endpoints/) are replaced; everything else there (.git,
    .gitattributes, a user's notes) stays untouched. A file of someone else's inside data/ or
    endpoints/ is refused, named, before anything moves."""
    if not target.exists():
        os.replace(new, target)
        fsync_dir(target.parent)
        return
    _check_out_dir(target)
    _refuse_foreign_files(target)  # again: they may have appeared during the build
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    done: list[str] = []
    try:
        for name in OWN_ENTRIES:
            done.append(name)
            if os.path.lexists(target / name):
                os.replace(target / name, old / name)
            if os.path.lexists(new / name):
                os.replace(new / name, target / name)
    except BaseException:  # put the earlier build back as it was (the new one back in its work folder)
        for name in reversed(done):
            if os.path.lexists(target / name) and not os.path.lexists(new / name):
                os.replace(target / name, new / name)
            if os.path.lexists(old / name):
                os.replace(old / name, target / name)
        shutil.rmtree(old, ignore_errors=True)
        raise
    fsync_dir(target)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(new, ignore_errors=True)  # empty now, save what was left of the work folder
