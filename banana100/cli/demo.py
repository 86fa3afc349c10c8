"""`banana100 demo`: the offline demo."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command, number, POSITIVE_INT


def add_parser(sub) -> None:
    d = command(sub, "demo", "generate, build, score and report on bundled sample images, offline")
    d.add_argument("--out", type=Path, default=Path("demo_output"), help="folder for everything the demo writes")
    d.add_argument("--steps", type=POSITIVE_INT, default=20, help="edit steps per chain")
    from banana100.demo import SAMPLE_IMAGES

    d.add_argument("--chains", type=number(int, 1, high=len(SAMPLE_IMAGES)), default=4,
                   help=f"number of sample images, one chain each (at most {len(SAMPLE_IMAGES)})")
    d.add_argument("--metrics", default="auto", help="comma-separated pyiqa ids, pyiqa:<id>, or the folder / Hub id "
                                                     "of your own evaluate module; 'auto' = the classical metrics "
                                                     "whose files are at hand, and the edit_damage detector "
                                                     "(no files; alone and against step 0)")
    d.set_defaults(func=run)


def run(args) -> None:
    import time

    from banana100.demo import run_demo

    t0 = time.perf_counter()
    report = run_demo(out=args.out, steps=args.steps, chains=args.chains, metrics=args.metrics)
    print(f"demo: done in {time.perf_counter() - t0:.0f} s; report: {report.resolve()}")
