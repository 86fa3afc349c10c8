"""The demo set: a small offline set of simulated chains and their scores (`build_demo_set`), and
the page's plain statement about it (`demo_note`)."""

from __future__ import annotations

import os
from pathlib import Path

from banana100.errors import Banana100Error
from banana100.explore.common import DETECTORS, RELATIVE, metric_label, with_detector
from banana100.explore.explorer import Explorer


def demo_set_name(metrics: list[str], chains: int, steps: int, side: int) -> str:
    """The demo set's folder name: banana100's version, the detector's when edit_damage is among the metrics
    (a set scored by an earlier edit_damage is not reused), the set's size and its metrics."""
    from banana100 import __version__
    from banana100.metrics.table import get_metric

    detector = f"-ed{get_metric('edit_damage').version}" if "edit_damage" in metrics else ""
    return f"demo-v{__version__}{detector}-{chains}x{steps}-{side}-{'+'.join(metrics)}"


def build_demo_set(cache_dir: str | os.PathLike, chains: int = 4, steps: int = 20, metrics: str = "auto",
                   side: int = 768, progress: bool = False, log=None) -> tuple[Path, Path]:
    """Make (or reuse) a small offline set in `cache_dir`: (dataset folder, scores file).

    Generated sources like the paper's (`synth.GENERATED_SOURCES`: smooth, noise-free, flat and
    textured areas; `side` pixels wide) -> simulated-editor chains -> a dataset folder -> scores
    of `metrics` ("auto": PIQE plus NIQE and BRISQUE when their parameter files are at hand).
    The sources are shown at their own size: shrinking a grainy image averages its grain away,
    which is why the set is not made smaller than the effect needs. Each stage resumes; a
    finished set is reused as is. Its folder is named by this toolkit's version and the metrics
    this install can compute, so a cache shared by several clones or versions never shows
    scores this install could not make. `log` (e.g. print) hears whether the set is built or
    reused, and each stage of a build; `progress` shows the bars of generation and scoring.
    """
    from banana100 import __version__
    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains
    from banana100.dataset.build import build_dataset
    from banana100.demo import pick_metrics
    from banana100.scoring import score_to_parquet
    from banana100.synth import GENERATED_SOURCES_LICENCE, generated_sources

    say = log or (lambda text: None)
    chosen = pick_metrics(metrics)
    if metrics == "auto":  # the detector's curves (alone, and since step 0) beside the NR-IQA metrics'
        chosen = with_detector([*chosen, RELATIVE])
    if not chosen:
        raise Banana100Error("no metric available for the demo set")
    root = Path(cache_dir) / demo_set_name(chosen, chains, steps, side)
    dataset, scores = root / "dataset", root / "scores.parquet"
    done = root / "DONE"
    if done.is_file() and dataset.is_dir() and scores.is_file():
        say(f"reusing the demo set in {root} (built earlier by banana100 {__version__}; metrics {', '.join(chosen)})")
        return dataset, scores
    say(f"building a demo set in {root}: {chains} chains x {steps} steps, {side} px, metrics {', '.join(chosen)}")
    say(f"1/4 drawing {chains} sources")
    sources = generated_sources(root / "sources", chains, side)
    run_dir = root / "run"
    say(f"2/4 running {chains} simulated chains of {steps} steps")
    generate_chains(make_editor("simulated"), sources=sources, setting="replicate", steps=steps, repeats=1,
                    out_dir=run_dir, progress=progress)
    say("3/4 writing the dataset folder")
    if not dataset.is_dir():  # the card states the drawn sources' licence (the chains keep it)
        build_dataset([run_dir], dataset,
                      source_licences={p.stem: GENERATED_SOURCES_LICENCE for p in sources.glob("*.png")})
    say(f"4/4 scoring {chains * (steps + 1)} images with {', '.join(chosen)}")
    score_to_parquet(dataset, chosen, scores, device="cpu", progress=progress)
    done.write_text("ok\n")
    say(f"built the demo set in {root}")
    return dataset, scores


#: What the paper measured on the real chains, for the page (arXiv:2604.03400; docs/evaluators.md).
REAL_CHAIN_FACTS = (
    "On the paper's real Nano Banana Pro chains no pyiqa metric passed every chain (21 tested); only two "
    "large vision-language judges (VisualQuality-R1, RALI) did. BRISQUE even *improved* on a replicated "
    "chain (34.1 -> -9.8, lower is better) while the static noise grew, and people see that noise by "
    "steps 5-10."
)


def demo_note(explorer: Explorer, chains: int, steps: int, side: int) -> str:
    """The page's plain statement about the simulated demo set: what it is, what failed on it."""
    failed = explorer.failure_sentence() or "no metric scored"
    passed_all = [metric_label(m) for m, r in explorer.results.items()
                  if r["n_failed"] == 0 and r["n_chains"] - r["n_incomplete"] > 0 and m not in DETECTORS]
    caveat = (f" {', '.join(passed_all)} saw the damage in every simulated chain, which the real chains do not "
              "bear out: the simulation is not the real editor." if passed_all else "")
    detectors = [metric_label(m) for m in DETECTORS if m in explorer.results]
    if detectors:  # ours: what it caught here, and where its own limits are written
        caveat += (f" This toolkit's detector ({', '.join(detectors)}; the black curves) needs no file; "
                   "docs/edit-damage.md says what it was validated on and how far the bare score holds on one "
                   "image alone.")
    return (f"**Simulated demo set** (no internet, so not the real Banana100 chains).{_skipped(explorer)} "
            f"{chains} chains of {steps} "
            f"steps made here by the *simulated* editor from drawn sources like the paper's (smooth, noise-free, "
            f"{side} px wide, flat and textured areas). On it: {failed}.{caveat} {REAL_CHAIN_FACTS}")


def _skipped(explorer: Explorer) -> str:
    """' NIQE and BRISQUE are not shown: ...' for the default metrics left out for want of their files."""
    from banana100.demo import AUTO_METRICS
    from banana100.metrics.weights import missing

    gone = [m for m in AUTO_METRICS if m not in explorer.results and missing(m)]
    if not gone:
        return ""
    names = " and ".join(metric_label(m) for m in gone)
    return (f" {names} {'is' if len(gone) == 1 else 'are'} not shown: {'its' if len(gone) == 1 else 'their'} "
            f"parameter files are not on this machine (`banana100 weights download {' '.join(gone)}` adds them, "
            "online).")
