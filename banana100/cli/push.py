"""`banana100 push`: verify and upload a dataset folder to the Hub."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command


def add_parser(sub) -> None:
    pu = command(sub, "push", "verify and upload a dataset folder to the Hub")
    pu.add_argument("dataset_dir", type=Path, help="dataset folder written by build-dataset")
    pu.add_argument("--repo-id", required=True, help="ORG/NAME of the Hub dataset (required)")
    pu.add_argument("--dry-run", action="store_true", help="list the files and the commit plan; upload nothing")
    pu.add_argument("--private", action="store_true", help="create the dataset repository as private")
    pu.add_argument("--no-verify", action="store_true", help="skip `banana100 verify` before uploading")
    pu.set_defaults(func=run)


def run(args) -> None:
    from banana100.dataset.publish import push_dataset

    plan = push_dataset(args.dataset_dir, args.repo_id, dry_run=args.dry_run, private=args.private,
                        verify=not args.no_verify)
    print(plan.describe())
    print("dry run: nothing uploaded" if args.dry_run else f"pushed: https://huggingface.co/datasets/{args.repo_id}")
