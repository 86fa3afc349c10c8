"""`banana100` command line: generate, build-dataset, score, report, demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import Banana100Error


def _cmd_generate(args) -> None:
    from .editors import make_editor
    from .runner import generate_chains

    editor = make_editor(args.editor)
    summary = generate_chains(
        editor,
        sources=args.sources,
        setting=args.setting,
        steps=args.steps,
        repeats=args.repeats,
        out_dir=args.out,
        concurrency=args.concurrency,
        seed=args.seed,
    )
    print(summary)


def _cmd_build_dataset(args) -> None:
    from .dataset_script.build import build_dataset

    out = build_dataset(args.run_dirs, args.out)
    print(f"dataset written to {out}; load it with datasets.load_dataset({str(out)!r})")


def _cmd_score(args) -> None:
    from .registry import parse_metric_list
    from .scoring import score_to_parquet

    out = score_to_parquet(
        args.source, parse_metric_list(args.metrics), args.out, device=args.device, batch_size=args.batch_size
    )
    print(f"scores written to {out}")


def _cmd_report(args) -> None:
    from .report import write_report

    path = write_report(args.scores, args.out)
    print(f"report written to {path}")


def _cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(out=args.out, steps=args.steps, chains=args.chains, metrics=args.metrics)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="banana100", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="make degradation chains (resumable: rerun the same command)")
    g.add_argument("--editor", default="simulated", help="editor: simulated (offline model of the effect)")
    g.add_argument("--sources", required=True, type=Path, help="folder of source images")
    g.add_argument("--setting", default="replicate", help="setting name from generation/settings.yaml")
    g.add_argument("--steps", type=int, default=100, help="edit steps per chain")
    g.add_argument("--repeats", type=int, default=1, help="chains per source image")
    g.add_argument("--concurrency", type=int, default=4, help="chains run at once")
    g.add_argument("--seed", type=int, default=0, help="base seed (each chain and step derives its own)")
    g.add_argument("--out", required=True, type=Path, help="run folder")
    g.set_defaults(func=_cmd_generate)

    b = sub.add_parser("build-dataset", help="write a Hub-ready dataset folder from run folders")
    b.add_argument("run_dirs", nargs="+", type=Path)
    b.add_argument("--out", required=True, type=Path)
    b.set_defaults(func=_cmd_build_dataset)

    s = sub.add_parser("score", help="score every image of a run or dataset folder (resumable)")
    s.add_argument("source", type=Path, help="run folder or dataset folder")
    s.add_argument("--metrics", default="piqe,niqe,brisque", help="comma-separated pyiqa ids, or 'all'")
    s.add_argument("--out", required=True, type=Path, help="scores .parquet file")
    s.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda when available)")
    s.add_argument("--batch-size", type=int, default=8)
    s.set_defaults(func=_cmd_score)

    r = sub.add_parser("report", help="sensitivity report (markdown + plot) from a scores file")
    r.add_argument("scores", type=Path)
    r.add_argument("--out", required=True, type=Path, help="report folder")
    r.set_defaults(func=_cmd_report)

    d = sub.add_parser("demo", help="generate, build, score and report on bundled sample images, offline")
    d.add_argument("--out", type=Path, default=Path("demo_output"))
    d.add_argument("--steps", type=int, default=20)
    d.add_argument("--chains", type=int, default=4, help="number of sample images (one chain each)")
    d.add_argument("--metrics", default="auto", help="'auto' = classical metrics whose files are at hand")
    d.set_defaults(func=_cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except Banana100Error as e:
        print(f"banana100 {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nbanana100 {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 0
