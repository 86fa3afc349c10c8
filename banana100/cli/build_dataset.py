"""`banana100 build-dataset`: write a Hub-ready dataset folder from run folders."""

from __future__ import annotations

from pathlib import Path

from banana100 import about
from banana100.cli.common import command, POSITIVE_INT


def add_parser(sub) -> None:
    b = command(sub, "build-dataset", "write a Hub-ready dataset folder from run folders")
    b.add_argument("run_dirs", nargs="+", type=Path, help="run folders (each with a manifest.jsonl)")
    b.add_argument("--out", required=True, type=Path, help="dataset folder to write (required; rerun to resume)")
    b.add_argument("--num-proc", type=POSITIVE_INT, default=None,
                   help="processes for checking images and writing the data folders (default: threads, one writer)")
    b.add_argument("--source-licences", type=Path, default=None,
                   help="YAML file, one `source_id: licence` per line: the licences of the source images, which the "
                        "images made from them keep (default: none recorded; the card then says so)")
    b.add_argument("--source-dataset", action="append", default=None, metavar="HUB_ID",
                   help=f"Hub dataset the chains were imported from, e.g. {about.ORIGINAL_DATASET} (its licence "
                        "applies); repeatable (default: none: the chains were made here)")
    b.add_argument("--licence", default=None,
                   help="Hub licence id for the whole dataset, e.g. cc0-1.0 (default: worked out from the sources)")
    b.add_argument("--repo-id", default=None,
                   help="ORG/NAME the card's loading lines use (default: ORG/NAME until `banana100 push` sets it)")
    b.set_defaults(func=run)


def run(args) -> None:
    from banana100.dataset.build import build_dataset

    out = build_dataset(args.run_dirs, args.out, num_proc=args.num_proc, licence=args.licence,
                        source_licences=args.source_licences, source_datasets=args.source_dataset,
                        repo_id=args.repo_id)
    print(f"dataset written to {out}; load it with datasets.load_dataset({str(out)!r})")
