"""What the Space shows: which source it opens (`space_source`) and the original release opened
as an `Explorer` (`open_release`)."""

from __future__ import annotations

import os

from banana100.explore.common import DATASET_ENV, RELEASE_ENV
from banana100.explore.explorer import Explorer
from banana100.explore.ondemand import ChainScores
from banana100.explore.release import ReleaseChains, ReleaseSpec


def space_source(env=None) -> str:
    """'dataset' (BANANA100_SPACE_DATASET is set), 'release' (the original release: on the Hub, or
    BANANA100_SPACE_RELEASE is set), or 'demo' (offline: the simulated demo set)."""
    env = os.environ if env is None else env
    if (env.get(DATASET_ENV) or "").strip():
        return "dataset"
    if (env.get(RELEASE_ENV) or "").strip() or (env.get("SPACE_ID") or "").strip():  # SPACE_ID: set on the Hub
        return "release"
    return "demo"


def open_release(spec: ReleaseSpec, cache_dir: str | os.PathLike, metrics, device: str = "cpu") -> Explorer:
    """The original release, chains fetched when shown; scores from the release's published
    scores file when it has one, otherwise computed on demand per chain (`ChainScores`)."""
    images = ReleaseChains(spec, cache_dir)
    published = images.published_scores()
    if published is not None:
        from banana100.report import load_scores

        return Explorer(images, load_scores(published),
                        note=f"Scores: the release's own scores file `{published.name}`.")
    on_demand = ChainScores(images.cache / "scores", device=device)
    return Explorer(images, None, on_demand=on_demand, metrics=metrics,
                    note="Scores are computed when a chain is first shown (then cached): the summary covers "
                         "the chains scored so far.")
