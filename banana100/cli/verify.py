"""`banana100 verify`: check a dataset folder."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command, COUNT


def add_parser(sub) -> None:
    v = command(sub, "verify", "check a dataset folder: counts, sha256 of every image, parent links, steps")
    v.add_argument("dataset_dir", type=Path, help="dataset folder written by build-dataset")
    v.add_argument("--decode", action="store_true", help="also decode every image in full (slow)")
    v.add_argument("--max-problems", type=COUNT, default=100, help="problems printed (all are counted)")
    v.set_defaults(func=run)


def run(args) -> None:
    from banana100.errors import DatasetError
    from banana100.dataset.verify import verify_dataset

    report = verify_dataset(args.dataset_dir, decode=args.decode)
    for problem in report.problems[: args.max_problems]:
        print(problem)
    if len(report.problems) > args.max_problems:
        print(f"... and {len(report.problems) - args.max_problems} more")
    print(report.summary())
    if not report.ok:
        raise DatasetError(f"{args.dataset_dir}: {len(report.problems)} problem(s) found")
