"""`banana100` command line: generate, build-dataset, verify, import-chains, push, score, report, demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import Banana100Error


def _cmd_generate(args) -> None:
    from .editors import make_editor
    from .runner import generate_chains

    options = {}
    if args.editor.strip().lower() == "gemini":
        options = {
            "model": args.model or "gemini-3-pro-image-preview",
            "base_url": args.base_url,
            "timeout_s": args.timeout,
            "max_attempts": args.max_attempts,
            "safety_retries": args.safety_retries,
        }
    elif args.model or args.base_url:
        raise Banana100Error(f"--model and --base-url apply to the gemini editor, not {args.editor!r}")
    editor = make_editor(args.editor, **options)
    summary = generate_chains(
        editor,
        sources=args.sources,
        setting=args.setting,
        steps=args.steps,
        repeats=args.repeats,
        out_dir=args.out,
        concurrency=args.concurrency,
        seed=args.seed,
        max_cost=args.max_cost,
        rpm=args.rpm,
        dry_run=args.dry_run,
        retry_stopped=args.retry_stopped,
    )
    print(summary)


def _cmd_build_dataset(args) -> None:
    from .dataset_script.build import build_dataset

    out = build_dataset(args.run_dirs, args.out, num_proc=args.num_proc)
    print(f"dataset written to {out}; load it with datasets.load_dataset({str(out)!r})")


def _cmd_verify(args) -> None:
    from .errors import DatasetError
    from .verify import verify_dataset

    report = verify_dataset(args.dataset_dir, decode=args.decode)
    for problem in report.problems[: args.max_problems]:
        print(problem)
    if len(report.problems) > args.max_problems:
        print(f"... and {len(report.problems) - args.max_problems} more")
    print(report.summary())
    if not report.ok:
        raise DatasetError(f"{args.dataset_dir}: {len(report.problems)} problem(s) found")


def _cmd_import_chains(args) -> None:
    from .importer import import_chains

    summary = import_chains(args.folder, args.pattern, args.out, setting=args.setting, repeat=args.repeat,
                            model=args.model, prompt=args.prompt, link=args.link)
    print(summary)


def _cmd_push(args) -> None:
    from .publish import push_dataset

    plan = push_dataset(args.dataset_dir, args.repo_id, dry_run=args.dry_run, private=args.private,
                        verify=not args.no_verify)
    print(plan.describe())
    print("dry run: nothing uploaded" if args.dry_run else f"pushed: https://huggingface.co/datasets/{args.repo_id}")


def _cmd_score(args) -> None:
    from .registry import parse_metric_list
    from .scoring import score_to_parquet

    out = score_to_parquet(
        args.source, parse_metric_list(args.metrics), args.out, device=args.device, batch_size=args.batch_size,
        backend=args.backend, mode=args.mode,
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
    g.add_argument(
        "--editor", default="simulated", help="editor: simulated (offline model of the effect) or gemini (Nano Banana)"
    )
    g.add_argument(
        "--model",
        default=None,
        help="gemini model id: gemini-3-pro-image-preview (Nano Banana Pro, default) or "
        "gemini-3.1-flash-image-preview (Nano Banana 2, fast)",
    )
    g.add_argument(
        "--base-url", default=None, help="gemini: API base URL (default: $GOOGLE_GEMINI_BASE_URL, else Google's)"
    )
    g.add_argument("--sources", required=True, type=Path, help="folder of source images")
    g.add_argument("--setting", default="replicate", help="setting name from generation/settings.yaml")
    g.add_argument("--steps", type=int, default=100, help="edit steps per chain")
    g.add_argument("--repeats", type=int, default=1, help="chains per source image")
    g.add_argument("--concurrency", type=int, default=4, help="chains run at once")
    g.add_argument("--seed", type=int, default=0, help="base seed (each chain and step derives its own)")
    g.add_argument("--out", required=True, type=Path, help="run folder")
    g.add_argument(
        "--max-cost", type=float, default=None, help="USD cap on the estimated spend of the run folder; stops cleanly"
    )
    g.add_argument("--rpm", type=float, default=None, help="client-side rate limit, requests per minute (all chains)")
    g.add_argument("--dry-run", action="store_true", help="show chains, steps, cost estimate and prompts; call nothing")
    g.add_argument("--retry-stopped", action="store_true", help="retry chains the editor stopped (safety blocks)")
    g.add_argument("--timeout", type=float, default=180.0, help="gemini: seconds per request before retrying")
    g.add_argument("--max-attempts", type=int, default=6, help="gemini: calls per step on transient faults")
    g.add_argument("--safety-retries", type=int, default=3, help="gemini: new-seed retries after safety blocks")
    g.set_defaults(func=_cmd_generate)

    b = sub.add_parser("build-dataset", help="write a Hub-ready dataset folder from run folders")
    b.add_argument("run_dirs", nargs="+", type=Path)
    b.add_argument("--out", required=True, type=Path)
    b.add_argument("--num-proc", type=int, default=None,
                   help="processes for checking images and writing the data folders (default: threads, one writer)")
    b.set_defaults(func=_cmd_build_dataset)

    v = sub.add_parser("verify", help="check a dataset folder: counts, sha256 of every image, parent links, steps")
    v.add_argument("dataset_dir", type=Path)
    v.add_argument("--decode", action="store_true", help="also decode every image in full (slow)")
    v.add_argument("--max-problems", type=int, default=100, help="problems printed (all are counted)")
    v.set_defaults(func=_cmd_verify)

    ic = sub.add_parser("import-chains", help="turn a folder of chain images into a run folder with a manifest")
    ic.add_argument("folder", type=Path)
    ic.add_argument("--pattern", required=True,
                    help="file path template, e.g. '{chain}/step_{step:03d}.png' or '{setting}/{source}_r{repeat}/{step}.png'"
                         " (fields: chain, source, setting, repeat, step, model), or 're:REGEX' with named groups")
    ic.add_argument("--out", required=True, type=Path, help="run folder to write (rerun to resume)")
    ic.add_argument("--setting", default="replicate", help="setting when the pattern has no {setting}")
    ic.add_argument("--repeat", type=int, default=0, help="repeat when the pattern has no {repeat}")
    ic.add_argument("--model", default="unknown", help="editor model id when the pattern has no {model}")
    ic.add_argument("--prompt", default=None, help="prompt of every edit (default: the setting's, when known)")
    ic.add_argument("--link", action="store_true", help="hard-link the images instead of copying them")
    ic.set_defaults(func=_cmd_import_chains)

    pu = sub.add_parser("push", help="verify and upload a dataset folder to the Hub")
    pu.add_argument("dataset_dir", type=Path)
    pu.add_argument("--repo-id", required=True, help="ORG/NAME of the Hub dataset")
    pu.add_argument("--dry-run", action="store_true", help="list the files and the commit plan; upload nothing")
    pu.add_argument("--private", action="store_true")
    pu.add_argument("--no-verify", action="store_true", help="skip `banana100 verify` before uploading")
    pu.set_defaults(func=_cmd_push)

    s = sub.add_parser("score", help="score every image of a run or dataset folder (resumable)")
    s.add_argument("source", type=Path, help="run folder or dataset folder")
    s.add_argument("--metrics", default="piqe,niqe,brisque", help="comma-separated pyiqa ids, or 'all'")
    s.add_argument("--out", required=True, type=Path, help="scores .parquet file")
    s.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda when available)")
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--backend", choices=("native", "pyiqa"), default=None,
                   help="native (batched torch code; default for the hand-crafted metrics) or pyiqa for all")
    s.add_argument("--mode", choices=("pyiqa", "official"), default="pyiqa",
                   help="pyiqa's scores (default) or the original releases' (hand-crafted metrics, native backend)")
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

    from .weights_cli import add_parser as _add_weights_parser  # list | download | check

    _add_weights_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except Banana100Error as e:
        from .editors.base import BudgetExceeded

        if isinstance(e, BudgetExceeded):
            print(f"banana100 {args.command}: stopped: {e}", file=sys.stderr)
            return 3
        print(f"banana100 {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nbanana100 {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 0
