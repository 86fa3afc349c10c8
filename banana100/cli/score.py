"""`banana100 score`: score images, run folders or datasets."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from banana100.cli.common import command, NON_NEGATIVE, POSITIVE_INT
from banana100.metrics.table import ROSTER
from banana100.metrics.usermodule import DEFAULT_TIMEOUT_S
from banana100.errors import UsageError


def add_parser(sub) -> None:
    s = command(sub, "score", "score your own images, or every image of a run or dataset folder (resumable)")
    s.add_argument("source", nargs="+",
                   help="a folder of images (searched recursively), image files or glob patterns ('imgs/*.jpg'): one "
                        "row per image; or one run folder or dataset folder: one row per chain step")
    s.add_argument("--metrics", default=None,
                   help=f"comma-separated: metric-table ids, 'all' (the {len(ROSTER)} of the paper's roster), "
                        "visualquality_r1, pyiqa:<id> (any "
                        "pyiqa NR metric), or a folder / Hub id of your own evaluate module (docs/own-metric.md); "
                        "each checked for its files and extras before any work. Left out: those of the default "
                        "set whose files are at hand or fetched now (small parameter files, when online), the "
                        "others named first (default: piqe,niqe,brisque)")
    s.add_argument("--out", required=True, type=Path, help="scores .parquet file (required)")
    s.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="what goes to stdout once the file is written: a table per metric (n, failed, mean, min, "
                        "max, which direction is better), or this run's rows as CSV or JSON, alone, for a pipe")
    s.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda when available)")
    s.add_argument("--batch-size", type=POSITIVE_INT, default=None,
                   help="most images per forward pass, for every metric (default: each metric's own: 8 "
                        "same-size images; visualquality_r1 as many as the free GPU memory holds, 4 on CPU)")
    s.add_argument("--backend", choices=("native", "pyiqa"), default=None,
                   help="native (batched torch code; the hand-crafted metrics only) or pyiqa for all "
                        "(default: native for the hand-crafted metrics, pyiqa for the deep ones)")
    s.add_argument("--mode", choices=("pyiqa", "official"), default="pyiqa",
                   help="pyiqa's scores or the original releases' (hand-crafted metrics, native backend)")
    s.add_argument("--precision", choices=("exact", "fast"), default="exact",
                   help="exact: IEEE float32, TF32 off whatever torch's flags (the CPU's scores); fast: TF32 "
                        "on a GPU, and bfloat16 autocast for the deep metrics (each card states its error); "
                        "the scores file records which")
    s.add_argument("--keep-text", action="store_true",
                   help="visualquality_r1: keep what the model answered per image in <out>.texts.jsonl")
    s.add_argument("--max-pixels", type=POSITIVE_INT, default=None,
                   help="visualquality_r1: largest image area given to the model (default 4194304 = 2048x2048; "
                        "see metrics/visualquality_r1/README.md)")
    s.add_argument("--timeout-per-batch", type=NON_NEGATIVE, default=None, metavar="SECONDS",
                   help="a metric module of your own: the most seconds it may take to load, or on one batch, before "
                        "the run stops (keeping what was scored); 0: no limit (default: "
                        f"{DEFAULT_TIMEOUT_S:g}, far above what a real model takes on a batch)")
    s.add_argument("--reference", type=Path, default=None,
                   help="plain images: the image they were edited from; with edit_damage among the metrics, "
                        "edit_damage_rel then scores the damage added since it (chains use their own step 0; "
                        "default: none, edit_damage alone)")
    s.set_defaults(func=run)


def run(args) -> None:
    from banana100.metrics.athand import metrics_at_hand
    from banana100.metrics.resolve import parse_metrics, resolve
    from banana100.scoring import DEFAULT_METRICS, ScoreRun, Source
    from banana100.scoring.store import check_out

    # errors come first and alone: the options, then the sources, and only then the line about
    # default metrics left out (their files may be fetched now)
    if args.timeout_per_batch is not None:  # before a module of the user's is loaded and probed
        from banana100.metrics.usermodule import set_timeout

        set_timeout(args.timeout_per_batch)
    metrics = None if args.metrics is None else parse_metrics(args.metrics)  # table, pyiqa:<id>, a user's module
    if args.backend == "native" and metrics is not None:  # the default set has a native backend throughout
        plain = [m for m in metrics if "native" not in resolve(m).spec.backends]
        if plain:
            raise UsageError(f"--backend native: {', '.join(plain)} ha{'s' if len(plain) == 1 else 've'} no native "
                             "backend (only the six hand-crafted metrics do); leave --backend out to score each "
                             "metric with its default backend")
    check_out(Path(args.out))  # an option too: refused before the metrics' files are looked for or fetched
    source = Source.of(args.source if len(args.source) > 1 else args.source[0])  # walked once, checked
    if metrics is None:
        metrics = metrics_at_hand(DEFAULT_METRICS)
    plan = ScoreRun.plan(source, metrics, reference=args.reference, backend=args.backend)
    out = plan.run(args.out, device=args.device, batch_size=args.batch_size, mode=args.mode, keep_text=args.keep_text,
                   max_pixels=args.max_pixels, precision=args.precision)
    if int(os.environ.get("RANK", "0") or 0) != 0:  # accelerate / torchrun: process 0 alone shows the result
        return
    from banana100.cli import scoresout

    from banana100.scoring.inputs import source_ids

    # what this run scored, companions included, of this run's images (the file may hold others)
    rows = scoresout.scored_rows(out, plan.metrics, source_ids(plan.source.given))
    if args.format == "table":
        print(scoresout.summary_table(rows, plan.metrics))
        print(f"scores written to {out}")
    else:  # stdout carries the rows alone, for a pipe
        scoresout.write_rows(rows, args.format, sys.stdout)
        print(f"banana100 score: scores written to {out}", file=sys.stderr)
