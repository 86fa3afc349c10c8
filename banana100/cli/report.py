"""`banana100 report`: the sensitivity report and leaderboard."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command, POSITIVE_INT
from banana100.cli.common import check_steps


def add_parser(sub) -> None:
    r = command(sub, "report", "sensitivity report (markdown + plot) and leaderboard from scores files")
    r.add_argument("scores", type=Path, nargs="+",
                   help="scores .parquet files written by `banana100 score` (several: merged, e.g. one per editor)")
    r.add_argument("--out", required=True, type=Path, help="report folder (required)")
    r.add_argument("--by", default=None,
                   help="comma-separated manifest columns to group the leaderboard by (e.g. setting,editor); "
                        "writes leaderboard.csv, leaderboard.md and leaderboard.png (default: none; with several "
                        "scores files, the leaderboard of all chains)")
    r.add_argument("--reference-step", type=POSITIVE_INT, default=1, help="protocol: the step each check step is compared with")
    r.add_argument("--check-steps", type=check_steps, default=(5, 10, 20),
                   help="protocol: comma-separated steps that must all score worse than the reference "
                        "(ten-step releases: 2,5,10)")
    r.set_defaults(func=run)


def run(args) -> None:
    from banana100.errors import UsageError
    from banana100.report import check_out_dir, write_report

    if args.reference_step in args.check_steps:  # the protocol compares each check step with the reference step
        raise UsageError(f"--check-steps {','.join(map(str, args.check_steps))}: contains the reference step "
                         f"{args.reference_step} (--reference-step), which each check step is compared with; give "
                         "steps after it" + (" (the paper's: 5,10,20; ten-step releases: 2,5,10)"
                                            if args.reference_step == 1 else ""))
    check_out_dir(args.out)

    steps = dict(reference_step=args.reference_step, check_steps=args.check_steps)
    checked = f"steps checked: {', '.join(map(str, args.check_steps))} against step {args.reference_step}"
    if len(args.scores) == 1 and not args.by:  # the single-file report, as before
        path = write_report(args.scores[0], args.out, **steps)
        print(f"report written to {path} ({checked})")
        return
    from banana100.leaderboard import write_leaderboard

    by = [c.strip() for c in (args.by or "").split(",") if c.strip()]
    paths = write_leaderboard(args.scores, args.out, by=by, **steps)
    print(f"report written to {paths['report']} ({checked})")
    print(f"leaderboard written to {paths['csv']}, {paths['md']} and {paths['png']}")
