"""`banana100 weights list | download | check`: the weights store on the command line.

    banana100 weights list [METRIC ...] [--json]       every file, its size, checksum, licence, status
    banana100 weights download METRIC ... [--to DIR]  fetch into the usual caches (and copy to DIR)
    banana100 weights check [METRIC ...]              exit 1 unless every file is present and intact

`METRIC` is a metric of the table, or `all` (the default for list and check: the roster and the detectors).
An offline cluster: run `download ... --to DIR` where there is internet, copy DIR over, set
`BANANA100_WEIGHTS=DIR` and run `check`. Nothing here downloads unless asked to (`download`).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from banana100.cli.common import EXIT_DATA, EXIT_OK, HelpFormatter
from banana100.errors import UsageError, WeightsChecksumError, WeightsNotFoundError
from banana100.metrics import weights
from banana100.metrics.table import METRICS, WeightFile, get_metric
from banana100.texttable import columns


def _metrics(names: list[str]) -> list[str]:
    if not names or names == ["all"]:  # every metric of the table: the roster and the detectors (edit_damage)
        return list(METRICS)
    out = []
    for n in names:
        for part in n.split(","):
            if part.strip():
                out.append(get_metric(part.strip()).name)
    return out


def inventory(metrics: list[str]) -> list[tuple[WeightFile, list[str]]]:
    """Each distinct file the metrics need (by filename), with the metrics that use it."""
    seen: dict[str, tuple[WeightFile, list[str]]] = {}
    for m in metrics:
        for wf in get_metric(m).all_files:  # the roster and the evaluators (visualquality_r1)
            seen.setdefault(wf.filename, (wf, []))[1].append(m)
    return list(seen.values())


def status(wf: WeightFile, metric: str) -> dict:
    """Where the file is, or why it is not usable (never downloads)."""
    row = {
        "file": wf.filename, "role": wf.role, "size": wf.size, "sha256": wf.sha256,
        "sha256_prefix": wf.sha256_prefix, "licence": wf.licence, "url": wf.download_url, "cache": wf.cache,
    }
    try:
        row.update(state="ok", path=str(weights.resolve_file(wf, allow_download=False, metric=metric)))
    except WeightsChecksumError as e:
        row.update(state="bad-checksum", path=None, message=str(e))
    except WeightsNotFoundError as e:
        where = [w for _, w in getattr(e, "missing", [])]
        row.update(state="missing", path=None, message=str(e), where=where[0] if where else None)
    return row


def _size(n: int | None) -> str:
    """Bytes as 8.3 kB, 231 kB, 46.8 MB, 16.4 GB; "unknown" when neither table nor disk says."""
    if n is None:
        return "unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _real_size(row: dict) -> int | None:
    """The file's size on disk when present (a folder: its files), else the table's."""
    path = Path(row["path"]) if row.get("path") else None
    if path is not None and path.is_file():
        return path.stat().st_size
    if path is not None and path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return row["size"]


def _short_licence(text: str | None) -> str:
    """The licence's name, without the explanation after it (the full text: --json / -v)."""
    text = (text or "not stated").split(";")[0].split(":")[0].strip()
    return text if len(text) <= 40 else text.split(" (")[0][:40]


def cmd_list(args) -> int:
    rows = []
    for wf, users in inventory(_metrics(args.metrics)):
        r = status(wf, users[0])
        r["metrics"] = users
        rows.append(r)
    if args.json:
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    table = [("FILE", "SIZE", "METRICS", "LICENCE", "STATUS")]
    for r in rows:
        where = r["path"] if r["state"] == "ok" else r["state"]
        table.append((r["file"], _size(_real_size(r)), ",".join(r["metrics"]), _short_licence(r["licence"]), where))
    for i, line in enumerate(columns(table, right=(1,))):
        print(line)
        if args.verbose and i:
            r = rows[i - 1]
            check = r["sha256"] or (f"{r['sha256_prefix']}..." if r["sha256_prefix"] else "not pinned")
            print(f"    {r['role']}; sha256 {check}; {r['licence']}\n    from {r['url']}")
    n_ok = sum(r["state"] == "ok" for r in rows)
    print(f"{n_ok}/{len(rows)} files present (sizes: on disk, else the metric table's; licences in full: -v)")
    return EXIT_OK


def cmd_check(args) -> int:
    bad = 0
    for wf, users in inventory(_metrics(args.metrics)):
        r = status(wf, users[0])
        if r["state"] == "ok":
            print(f"ok           {wf.filename}  {r['path']}")
        else:  # one line per file; `weights list -v` and the scoring error say where it comes from
            bad += 1
            todo = f"put it at {r['where']}, from {wf.download_url}" if r.get("where") else r["message"]
            print(f"{r['state']:<12} {wf.filename}  for {','.join(users)}: {todo}")
    metrics = _metrics(args.metrics)
    ready = [m for m in metrics if not weights.missing(m)] if bad else metrics
    print(f"{len(ready)}/{len(metrics)} metrics ready: {', '.join(ready) or 'none'}")
    if bad:
        print(f"put the missing files in ${weights.ENV_VAR} (a folder), or run `banana100 weights download "
              f"{' '.join(m for m in metrics if m not in ready)}` where there is internet")
    return EXIT_DATA if bad else EXIT_OK


def cmd_download(args) -> int:
    if not args.metrics:
        raise UsageError("name the metrics to download (pyiqa ids, or `all`)")
    failed = 0
    dest = Path(args.to).expanduser() if args.to else None
    if dest:
        dest.mkdir(parents=True, exist_ok=True)
    for wf, users in inventory(_metrics(args.metrics)):
        try:
            path = weights.resolve_file(wf, allow_download=True, metric=users[0])
        except WeightsNotFoundError as e:
            failed += 1
            print(f"FAILED   {wf.filename}: {e}", file=sys.stderr)
            continue
        if dest is not None and path.resolve() != (dest / wf.filename).resolve():
            target = dest / wf.filename
            if path.is_dir():
                shutil.copytree(path, target, dirs_exist_ok=True, symlinks=False)
            else:
                shutil.copyfile(path, target)
            path = target
        print(f"ok       {wf.filename}  ({path})")
    if dest is not None and not failed:
        print(f"all files in {dest}; on the offline machine: export {weights.ENV_VAR}={dest} && banana100 weights check")
    return EXIT_DATA if failed else EXIT_OK


def add_parser(sub) -> None:
    """Register `weights` on the main CLI's subparsers."""
    fmt = dict(formatter_class=HelpFormatter)
    w = sub.add_parser("weights", help="list, download or check the metrics' parameter files and checkpoints",
                       description=__doc__.split("\n\n")[0], **fmt)
    wsub = w.add_subparsers(dest="weights_command", required=True)
    lst = wsub.add_parser("list", help="every file the metrics need: size, checksum, licence, where it is", **fmt)
    lst.add_argument("metrics", nargs="*", default=["all"], help="pyiqa ids, or all")
    lst.add_argument("--json", action="store_true", help="print one JSON list instead of the table")
    lst.add_argument("-v", "--verbose", action="store_true", help="also licence and download URL")
    lst.set_defaults(func=cmd_list)
    chk = wsub.add_parser("check", help=f"exit {EXIT_DATA} unless every file is present (and its sha256 right, where known)",
                          **fmt)
    chk.add_argument("metrics", nargs="*", default=["all"], help="pyiqa ids, or all")
    chk.set_defaults(func=cmd_check)
    dl = wsub.add_parser("download", help="download the files of METRIC... (needs internet)", **fmt)
    dl.add_argument("metrics", nargs="*", help="pyiqa ids, or all (required)")
    dl.add_argument("--to", default=None,
                    help="also copy every file into this folder (for BANANA100_WEIGHTS on an offline machine); "
                         "default: only the usual caches")
    dl.set_defaults(func=cmd_download)

