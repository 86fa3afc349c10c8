"""Exploring chains: one chain's images, its metric curves and verdicts, and live chains.

This is what the Gradio Space (`space/app.py`) shows, as library functions, so that the Space
stays a thin face and a notebook can do the same:

    ex = Explorer.open("banana100-dataset", "scores.parquet")   # folder, run folder or Hub id
    ex.chain_ids()                       # every chain, sorted
    ex.image(chain_id, step)             # PIL image (display size)
    curves = ex.curves(chain_id)         # every metric's score vs step, oriented + normalised
    plot_curves(curves, step=10)         # matplotlib figure: down = worse, marker at step 10
    ex.verdicts(chain_id)                # the protocol's verdict per metric for that chain
    ex.summary()                         # failure rate per metric over all chains

and, for a chain made live from one image (the Space's "Try it" tab):

    for step, rgb, meta in stream_chain(make_editor("simulated"), rgb, steps=20): ...

The original release (`ORIGINAL_RELEASE`: the Hub dataset and the pattern its file paths follow,
in one place) is listed up front and fetched one chain at a time; its scores are computed on
demand and cached (`ChainScores`), unless the release publishes a scores file:

    ex = open_release(ORIGINAL_RELEASE, cache_dir, metrics=["piqe", "niqe", "brisque"])
    ex.score_chain(chain_id, progress=lambda fraction, text: ...)
    view = ex.why(chain_id, step)        # crop, residual since step 1, MSCN map, GGD shapes

Orientation and verdicts come from `banana100.protocol` (through `banana100.report.analyse`);
nothing here re-implements them; chain files are grouped by `importer.plan_chains` and imported
by `importer.import_chains`, scores come from `engine.MetricScorer`. `build_demo_set` makes a
small offline set (generated paper-like sources, simulated editor, fast metrics) with the same
functions `banana100 demo` uses.

The parts, one concern each (this package re-exports their public names, so `ex.Explorer`,
`ex.ORIGINAL_RELEASE`, ... are read from here as before):

    common.py    what the parts share: the Space's environment variables, display size,
                 thumbnails, the detector's name, metric labels
    sources.py   chains on disk or on the Hub (`ChainInfo`, `ChainImages`)
    release.py   the original release, read one chain at a time (`ReleaseSpec`,
                 `ORIGINAL_RELEASE`, `ReleaseChains`)
    ondemand.py  scores computed on demand, cached on disk (`ChainScores`, `ON_DEMAND_STEPS`)
    curves.py    scores: curves, their plot, verdicts, summary (`chain_curves`, `plot_curves`, ...)
    why.py       why it fails: what changed in the image, what NIQE and BRISQUE look at (`why_view`)
    explorer.py  `Explorer`: chains and their scores, ready to show
    demoset.py   the offline demo set (`build_demo_set`, `demo_note`)
    space.py     what the Space opens (`space_source`, `open_release`)
    live.py      live chains, the Space's "Try it" (`check_upload`, `stream_chain`, samples)

Imports run one way: common <- sources <- release; sources <- ondemand; common <- curves; why
needs no other part, live only common; explorer takes common, sources, ondemand, curves and why;
demoset and space sit on explorer (space on release too).
"""

from __future__ import annotations

from banana100.errors import Banana100Error, DatasetError, ImageReadError, UploadError
from banana100.explore.common import (CACHE_ENV, DATASET_ENV, DEFAULT_CACHE, DETECTOR, DETECTORS, DISPLAY_SIDE,
                                      RELATIVE, RELEASE_ENV, RELEASE_PATTERN_ENV, SCORES_ENV, CHECK_STEPS_ENV,
                                      metric_label, with_detector)
from banana100.explore.sources import ChainImages, ChainInfo
from banana100.explore.release import ORIGINAL_RELEASE, ReleaseChains, ReleaseSpec
from banana100.explore.ondemand import ON_DEMAND_STEPS, ChainScores
from banana100.explore.curves import (VERDICT_TEXT, chain_curves, load_scores_any, plot_curves, summary_table,
                                      verdict_table)
from banana100.explore.why import WHY_CROP, damage_table, plot_mscn_histograms, why_view
from banana100.explore.explorer import Explorer, protocol_steps
from banana100.explore.demoset import REAL_CHAIN_FACTS, build_demo_set, demo_note
from banana100.explore.space import open_release, space_source
from banana100.explore.live import (LIVE_CHAIN_ID, LIVE_SOURCE_ID, check_upload, live_metrics, sample_image,
                                    sample_names, scores_frame, shrink, stream_chain)

__all__ = [
    # common
    "DATASET_ENV", "SCORES_ENV", "CACHE_ENV", "RELEASE_ENV", "RELEASE_PATTERN_ENV", "CHECK_STEPS_ENV", "DEFAULT_CACHE",
    "DISPLAY_SIDE",
    "DETECTOR", "DETECTORS", "RELATIVE", "with_detector", "metric_label",
    # sources, release, ondemand
    "ChainInfo", "ChainImages", "ReleaseSpec", "ORIGINAL_RELEASE", "ReleaseChains", "ON_DEMAND_STEPS", "ChainScores",
    # curves, why, explorer
    "load_scores_any", "chain_curves", "plot_curves", "VERDICT_TEXT", "verdict_table", "summary_table",
    "WHY_CROP", "why_view", "damage_table", "plot_mscn_histograms", "Explorer", "protocol_steps",
    # demoset, space, live
    "build_demo_set", "REAL_CHAIN_FACTS", "demo_note", "space_source", "open_release",
    "check_upload", "shrink", "LIVE_SOURCE_ID", "LIVE_CHAIN_ID", "stream_chain", "scores_frame", "live_metrics",
    "sample_names", "sample_image",
    # the errors these raise, as the single module had them at hand (ex.DatasetError, ...)
    "Banana100Error", "DatasetError", "ImageReadError", "UploadError",
]
