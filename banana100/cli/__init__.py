"""`banana100` command line: make chains, build and publish datasets, score them, report.

Exit status:
{exit_statuses}

Every error is one line on stderr (`banana100 COMMAND: error: ...`), never a traceback;
an unexpected exception (a bug) keeps its traceback. BANANA100_DEBUG=1 shows the traceback
of user errors too, above the same line, and changes nothing else (not the exit status).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from banana100 import __version__, about, extras
from banana100.cli.common import (
    COUNT, EXIT_DATA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, NON_NEGATIVE, POSITIVE, POSITIVE_INT, HelpFormatter,
    Parser, exit_status, exit_status_table, library_log, number, print_error, print_traceback,
)
from banana100.errors import Banana100Error, UsageError

if __doc__:  # (python -OO drops docstrings)
    __doc__ = __doc__.format(exit_statuses=exit_status_table())


def _steps(text: str) -> tuple[int, ...]:
    """'2,5,10' -> (2, 5, 10): the protocol's check steps."""
    try:
        steps = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated step numbers, got {text!r}") from None
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError(f"expected step numbers of at least 1, got {text!r}")
    return steps


def _cmd_generate(args) -> None:
    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains

    options = {}
    if args.editor.strip().lower() == "gemini":
        options = {
            "base_url": args.base_url,
            "timeout_s": args.timeout,
            "max_attempts": args.max_attempts,
            "safety_retries": args.safety_retries,
        }
        if args.model:  # else the editor's default model
            options["model"] = args.model
    elif args.editor.strip().lower() == "diffusers":
        if args.base_url:
            raise UsageError("--base-url applies to the gemini editor, not diffusers")
        options = {
            "model": args.model, "device": args.device, "dtype": args.dtype, "cpu_offload": args.cpu_offload,
            "vae_tiling": args.vae_tiling, "size": args.size, "max_batch": args.batch_size,
            "num_inference_steps": args.inference_steps, "guidance_scale": args.guidance,
        }
    elif args.model or args.base_url:
        raise UsageError(f"--model and --base-url apply to the gemini editor, not {args.editor!r}")
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
        chat=args.chat,
    )
    print(summary)


def _cmd_build_dataset(args) -> None:
    from banana100.dataset.build import build_dataset

    out = build_dataset(args.run_dirs, args.out, num_proc=args.num_proc, licence=args.licence,
                        source_licences=args.source_licences, source_datasets=args.source_dataset,
                        repo_id=args.repo_id)
    print(f"dataset written to {out}; load it with datasets.load_dataset({str(out)!r})")


def _cmd_verify(args) -> None:
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


def _cmd_import_chains(args) -> None:
    from banana100.chains.importer import import_chains

    summary = import_chains(args.folder, args.pattern, args.out, setting=args.setting, repeat=args.repeat,
                            model=args.model, prompt=args.prompt, link=args.link, chat_mode=args.chat_mode,
                            variant=args.variant)
    print(summary)


def _cmd_push(args) -> None:
    from banana100.dataset.publish import push_dataset

    plan = push_dataset(args.dataset_dir, args.repo_id, dry_run=args.dry_run, private=args.private,
                        verify=not args.no_verify)
    print(plan.describe())
    print("dry run: nothing uploaded" if args.dry_run else f"pushed: https://huggingface.co/datasets/{args.repo_id}")


def _cmd_publish_metrics(args) -> None:
    from banana100.metrics.hub.publish import push_metrics

    names = [n.strip() for n in args.metrics.split(",") if n.strip()]
    plan = push_metrics(args.org, names, dry_run=args.dry_run, source=args.source, private=args.private,
                        stage_dir=args.stage)
    print(plan.describe())
    print("dry run: nothing uploaded" if args.dry_run
          else f"pushed {len(plan.spaces)} Spaces: evaluate.load('{args.org}/<name>') now works")


def _cmd_score(args) -> None:
    from banana100.metrics.resolve import parse_metrics, resolve
    from banana100.metrics.athand import metrics_at_hand
    from banana100.scoring import DEFAULT_METRICS, image_files, score_to_parquet

    # errors come first and alone: the options, then the sources, and only then the line about
    # default metrics left out (their files may be fetched now)
    metrics = None if args.metrics is None else parse_metrics(args.metrics)  # table, pyiqa:<id>, a user's module
    if args.backend == "native" and metrics is not None:  # the default set has a native backend throughout
        plain = [m for m in metrics if "native" not in resolve(m).spec.backends]
        if plain:
            raise UsageError(f"--backend native: {', '.join(plain)} ha{'s' if len(plain) == 1 else 've'} no native "
                             "backend (only the six hand-crafted metrics do); leave --backend out to score each "
                             "metric with its default backend")
    source = args.source if len(args.source) > 1 else args.source[0]
    image_files(source)
    if metrics is None:
        metrics = metrics_at_hand(DEFAULT_METRICS)
    out = score_to_parquet(
        source, metrics, args.out, device=args.device,
        batch_size=args.batch_size, backend=args.backend, mode=args.mode, keep_text=args.keep_text,
        max_pixels=args.max_pixels, reference=args.reference, precision=args.precision,
    )
    if int(os.environ.get("RANK", "0") or 0) != 0:  # accelerate / torchrun: process 0 alone shows the result
        return
    from banana100.cli import scoresout

    # what this run scored: edit_damage_rel comes beside edit_damage for chains and with --reference
    from banana100.metrics.detector.relative import with_relative

    metrics = with_relative(metrics, chains=image_files(source) is None or args.reference is not None)
    rows = scoresout.scored_rows(out, metrics)
    if args.format == "table":
        print(scoresout.summary_table(rows, metrics))
        print(f"scores written to {out}")
    else:  # stdout carries the rows alone, for a pipe
        scoresout.write_rows(rows, args.format, sys.stdout)
        print(f"banana100 score: scores written to {out}", file=sys.stderr)


def _cmd_report(args) -> None:
    from banana100.report import write_report

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


def _cmd_demo(args) -> None:
    import time

    from banana100.demo import run_demo

    t0 = time.perf_counter()
    report = run_demo(out=args.out, steps=args.steps, chains=args.chains, metrics=args.metrics)
    print(f"demo: done in {time.perf_counter() - t0:.0f} s; report: {report.resolve()}")


def _version() -> str:

    have = [e for e in extras.EXTRAS if extras.extra_installed(e)]
    lack = [e for e in extras.EXTRAS if e not in have]
    return (f"banana100 {__version__} (extras installed: {', '.join(have) or 'none'}"
            + (f"; not installed: {', '.join(lack)}" if lack else "") + ")")


def build_parser() -> argparse.ArgumentParser:
    from banana100.chains.editors import gemini  # its defaults are the generate options' defaults

    p = Parser(prog="banana100", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter, **kw)

    g = command("generate", "make degradation chains (resumable: rerun the same command)")
    g.add_argument(
        "--editor", default="simulated",
        help="editor: simulated (offline model of the effect), gemini (Nano Banana) or diffusers (an open "
             "editor on your own GPU: FLUX.2, Qwen-Image-Edit, Kontext; see docs/open-editors.md)"
    )
    g.add_argument(
        "--model",
        default=None,
        help=f"gemini model id: {gemini.DEFAULT_MODEL} (Nano Banana Pro, the default) or "
        f"{gemini.FAST_MODEL} (Nano Banana 2, fast); diffusers: a Hub id or local pipeline folder (required)",
    )
    g.add_argument(
        "--base-url", default=None, help="gemini: API base URL (default: $GOOGLE_GEMINI_BASE_URL, else Google's)"
    )
    g.add_argument("--sources", required=True, type=Path, help="folder of source images (required)")
    g.add_argument("--setting", default="replicate", help="setting name from generation/settings.yaml")
    g.add_argument("--steps", type=POSITIVE_INT, default=100, help="edit steps per chain")
    g.add_argument("--repeats", type=POSITIVE_INT, default=1, help="chains per source image")
    g.add_argument("--concurrency", type=POSITIVE_INT, default=4, help="chains run at once")
    g.add_argument("--seed", type=int, default=0, help="base seed (each chain and step derives its own)")
    g.add_argument("--out", required=True, type=Path, help="run folder (required)")
    g.add_argument("--max-cost", type=NON_NEGATIVE, default=None,
                   help="USD cap on the estimated spend of the run folder; stops cleanly (default: no cap)")
    g.add_argument("--rpm", type=POSITIVE, default=None,
                   help="client-side rate limit, requests per minute, all chains (default: no limit)")
    g.add_argument("--dry-run", action="store_true", help="show chains, steps, cost estimate and prompts; call nothing")
    g.add_argument("--retry-stopped", action="store_true", help="retry chains the editor stopped (safety blocks)")
    g.add_argument("--chat", default="different", metavar="different|same",
                   help="different: a fresh request per step (the paper's protocol); same: one conversation per "
                   "chain, each request resends the earlier turns (gemini); 'different,same' makes both")
    g.add_argument("--timeout", type=POSITIVE, default=gemini.TIMEOUT_S, help="gemini: seconds per request before retrying")
    g.add_argument("--max-attempts", type=POSITIVE_INT, default=gemini.MAX_ATTEMPTS,
                   help="gemini: calls per step on transient faults")
    g.add_argument("--safety-retries", type=COUNT, default=gemini.SAFETY_RETRIES,
                   help="gemini: new-seed retries after safety blocks")
    g.add_argument("--device", default=None, help="diffusers: cpu, cuda, cuda:N (default: cuda when available)")
    g.add_argument("--dtype", default=None, help="diffusers: bfloat16 (default on GPU) or float32 (default on CPU)")
    g.add_argument("--cpu-offload", action="store_true",
                   help="diffusers: model CPU offload (each model on the GPU only while it runs; less memory, slower)")
    g.add_argument("--vae-tiling", action="store_true", help="diffusers: decode in tiles (large images in less memory)")
    g.add_argument("--size", choices=("source", "native"), default="source",
                   help="diffusers: output size: keep the source's (rounded down to a multiple of 16) or the "
                        "model's native ~1 MP at the source's aspect ratio")
    g.add_argument("--batch-size", type=POSITIVE_INT, default=1,
                   help="diffusers: most chains' images per pipeline call (default 1). FLUX.2 pipelines batch "
                        "the same step of several chains, at most --concurrency (Qwen-Image-Edit and Kontext take "
                        "1). At real sizes a GPU gains nothing per image (H200, batch 4: x1.00 for FLUX.2 [dev]'s "
                        "denoiser, x1.02 for Qwen-Image-Edit's; docs/open-editors.md): use more GPUs (torchrun) "
                        "instead. A batched chain is reproducible only up to float rounding")
    g.add_argument("--inference-steps", type=POSITIVE_INT, default=None,
                   help="diffusers: denoising steps per edit (default: the pipeline's, 50 for FLUX.2 and "
                        "Qwen-Image-Edit; 4 for step-distilled models, docs/open-editors.md); fixed for the run "
                        "folder, like --model and --seed: a resume must give the same (or leave it out again)")
    g.add_argument("--guidance", type=NON_NEGATIVE, default=None,
                   help="diffusers: guidance scale (default: the pipeline's); fixed for the run folder, as "
                        "--inference-steps")
    g.set_defaults(func=_cmd_generate)

    b = command("build-dataset", "write a Hub-ready dataset folder from run folders")
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
    b.set_defaults(func=_cmd_build_dataset)

    v = command("verify", "check a dataset folder: counts, sha256 of every image, parent links, steps")
    v.add_argument("dataset_dir", type=Path, help="dataset folder written by build-dataset")
    v.add_argument("--decode", action="store_true", help="also decode every image in full (slow)")
    v.add_argument("--max-problems", type=COUNT, default=100, help="problems printed (all are counted)")
    v.set_defaults(func=_cmd_verify)

    ic = command("import-chains", "turn a folder of chain images into a run folder with a manifest")
    ic.add_argument("folder", type=Path, help="folder holding the chain images")
    ic.add_argument("--pattern", required=True,
                    help="file path template, e.g. '{chain}/step_{step:03d}.png' or '{setting}/{source}_r{repeat}/{step}.png'"
                         " (fields: chain, source, setting, repeat, step, model, chat, variant), or 're:REGEX' with named"
                         " groups (required)")
    ic.add_argument("--out", required=True, type=Path, help="run folder to write (required; rerun to resume)")
    ic.add_argument("--setting", default="replicate", help="setting when the pattern has no {setting}")
    ic.add_argument("--repeat", type=COUNT, default=0, help="repeat when the pattern has no {repeat}")
    ic.add_argument("--model", default="unknown", help="editor model id when the pattern has no {model}")
    ic.add_argument("--chat-mode", default=None, help="same or different, when the pattern has no {chat} "
                    "(default: none recorded, read as the paper's different chat)")
    ic.add_argument("--variant", default=None, help="variant label of every chain, when the pattern has no {variant} (default: none)")
    ic.add_argument("--prompt", default=None, help="prompt of every edit (default: the setting's, when known)")
    ic.add_argument("--link", action="store_true", help="hard-link the images instead of copying them")
    ic.set_defaults(func=_cmd_import_chains)

    pu = command("push", "verify and upload a dataset folder to the Hub")
    pu.add_argument("dataset_dir", type=Path, help="dataset folder written by build-dataset")
    pu.add_argument("--repo-id", required=True, help="ORG/NAME of the Hub dataset (required)")
    pu.add_argument("--dry-run", action="store_true", help="list the files and the commit plan; upload nothing")
    pu.add_argument("--private", action="store_true", help="create the dataset repository as private")
    pu.add_argument("--no-verify", action="store_true", help="skip `banana100 verify` before uploading")
    pu.set_defaults(func=_cmd_push)

    pm = command("publish-metrics", "push the metric folders (evaluate modules + cards + widget apps) "
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
    pm.set_defaults(func=_cmd_publish_metrics)

    s = command("score", "score your own images, or every image of a run or dataset folder (resumable)")
    s.add_argument("source", nargs="+",
                   help="a folder of images (searched recursively), image files or glob patterns ('imgs/*.jpg'): one "
                        "row per image; or one run folder or dataset folder: one row per chain step")
    s.add_argument("--metrics", default=None,
                   help="comma-separated: metric-table ids, 'all' (the 21), visualquality_r1, pyiqa:<id> (any "
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
    s.add_argument("--reference", type=Path, default=None,
                   help="plain images: the image they were edited from; with edit_damage among the metrics, "
                        "edit_damage_rel then scores the damage added since it (chains use their own step 0; "
                        "default: none, edit_damage alone)")
    s.set_defaults(func=_cmd_score)

    r = command("report", "sensitivity report (markdown + plot) and leaderboard from scores files")
    r.add_argument("scores", type=Path, nargs="+",
                   help="scores .parquet files written by `banana100 score` (several: merged, e.g. one per editor)")
    r.add_argument("--out", required=True, type=Path, help="report folder (required)")
    r.add_argument("--by", default=None,
                   help="comma-separated manifest columns to group the leaderboard by (e.g. setting,editor); "
                        "writes leaderboard.csv, leaderboard.md and leaderboard.png (default: none; with several "
                        "scores files, the leaderboard of all chains)")
    r.add_argument("--reference-step", type=POSITIVE_INT, default=1, help="protocol: the step each check step is compared with")
    r.add_argument("--check-steps", type=_steps, default=(5, 10, 20),
                   help="protocol: comma-separated steps that must all score worse than the reference "
                        "(ten-step releases: 2,5,10)")
    r.set_defaults(func=_cmd_report)

    d = command("demo", "generate, build, score and report on bundled sample images, offline")
    d.add_argument("--out", type=Path, default=Path("demo_output"), help="folder for everything the demo writes")
    d.add_argument("--steps", type=POSITIVE_INT, default=20, help="edit steps per chain")
    from banana100.demo import SAMPLE_IMAGES

    d.add_argument("--chains", type=number(int, 1, high=len(SAMPLE_IMAGES)), default=4,
                   help=f"number of sample images, one chain each (at most {len(SAMPLE_IMAGES)})")
    d.add_argument("--metrics", default="auto", help="comma-separated pyiqa ids, pyiqa:<id>, or the folder / Hub id "
                                                     "of your own evaluate module; 'auto' = the classical metrics "
                                                     "whose files are at hand, and the edit_damage detector "
                                                     "(no files; alone and against step 0)")
    d.set_defaults(func=_cmd_demo)

    from banana100.cli import weights  # list | download | check

    weights.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits with status 2 on a bad command line
    name = " ".join(["banana100", args.command] + ([args.weights_command] if args.command == "weights" else []))
    debug = os.environ.get("BANANA100_DEBUG", "") not in ("", "0")
    import warnings

    plain_format = warnings.formatwarning
    if not debug:  # a warning is one line too, like an error (no source line of ours under it)
        warnings.formatwarning = lambda message, category, *_, **__: f"{name}: warning: {message}\n"
    try:
        with library_log(name):  # the library's progress and warnings, one line each on stderr
            status = _run(args, name, debug)
    finally:  # main() may be called in-process (tests, notebooks): leave warnings as they were
        warnings.formatwarning = plain_format
    return status


def _run(args, name: str, debug: bool) -> int:
    """args.func(args), with every user error turned into one line and an exit status."""
    try:
        status = args.func(args)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Banana100Error as e:
        from banana100.errors import BudgetExceeded

        print_traceback(debug)
        print_error(name, e, "stopped" if isinstance(e, BudgetExceeded) else "error")
        return exit_status(e)
    except ModuleNotFoundError as e:

        extra = extras.MODULE_EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        print_traceback(debug)
        print_error(name, f"{e.name} is not installed: {extras.install_hint(extra)}")
        return EXIT_USAGE
    except BrokenPipeError:  # `banana100 weights list | head -1`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit flush does not fail again
        return EXIT_OK
    except OSError as e:  # permission denied, disk full, a path that is a file: the user's to fix
        print_traceback(debug)
        print_error(name, e)
        return EXIT_DATA
    return int(status or 0)
