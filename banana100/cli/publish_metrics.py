"""`banana100 publish-metrics`: push the metric folders to the Hub as Spaces."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command


def add_parser(sub) -> None:
    pm = command(sub, "publish-metrics", "push the metric folders (evaluate modules + cards + widget apps) "
                 "to the Hub as Spaces, one per metric")
    pm.add_argument("--org", required=True, help="Hub user or organisation that will own the Spaces (required)")
    pm.add_argument("--metrics", default="all", help="comma-separated folder names (pyiqa ids, banana100_sensitivity)")
    pm.add_argument("--source", default=None,
                    help="where the Spaces install banana100 from: a pip URL such as git+https://...@TAG or a wheel "
                         "URL (default: banana100/about.py's CODE_REPOSITORY at RELEASE_TAG)")
    pm.add_argument("--stage", type=Path, default=None,
                    help="folder to stage the Spaces' files in (default: a new temporary folder)")
    pm.add_argument("--private", action="store_true", help="create the Spaces as private")
    pm.add_argument("--dry-run", action="store_true", help="stage and check every folder, print the plan; upload nothing")
    pm.set_defaults(func=run)


def run(args) -> None:
    from banana100.metrics.hub.publish import push_metrics

    names = [n.strip() for n in args.metrics.split(",") if n.strip()]
    plan = push_metrics(args.org, names, dry_run=args.dry_run, source=args.source, private=args.private,
                        stage_dir=args.stage)
    print(plan.describe())
    print("dry run: nothing uploaded" if args.dry_run
          else f"pushed {len(plan.spaces)} Spaces: evaluate.load('{args.org}/<name>') now works")
