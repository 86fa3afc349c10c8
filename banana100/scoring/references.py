"""Each image's reference for the metrics that measure against one (`edit_damage_rel`, the
metric table's `companion` of edit_damage): a chain's step 0 (from the run folder's manifest or
the dataset's rows), or the image given by `score --reference` for plain images. The metric
itself (banana100.metrics.detector.relative) reads neither chains nor datasets: scoring finds
the sources for it here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from banana100.metrics.table import METRICS

log = logging.getLogger("banana100.scoring")


def with_companions(metrics: list[str], references: bool) -> list[str]:
    """`metrics` plus each one's companion (the table's `companion`: edit_damage_rel beside
    edit_damage) right after it, when the images have references: chains (their source is in the
    manifest) or plain images given `--reference`."""
    out = list(metrics)
    if not references:
        return out
    for name in metrics:
        companion = METRICS[name].companion if name in METRICS else None
        if companion and companion not in out:
            out.insert(out.index(name) + 1, companion)
    return out


def chain_sources(source) -> Callable[[dict], tuple[str, object] | None]:
    """record -> (chain_id, step 0's image) of a run or dataset folder; read once, on first use."""
    index: dict[str, object] | None = None

    def build() -> dict[str, object]:
        from banana100.chains.manifest import MANIFEST_NAME, image_path, read_manifest

        root = Path(source)
        if (root / MANIFEST_NAME).is_file():
            return {r["chain_id"]: image_path(root, r) for r in read_manifest(root) if r["step"] == 0}
        from banana100.dataset.reader import card_configs, iter_dataset_records

        names = {c.get("config_name") for c in card_configs(root) or []}
        config = "endpoints" if "endpoints" in names else "default"  # the small config holds step 0
        return {r["chain_id"]: data for r, data in iter_dataset_records(root, config) if r.get("step") == 0}

    def find(record: dict):
        nonlocal index
        chain = record.get("chain_id")
        if chain is None:
            return None
        if index is None:
            index = build()
        return (chain, index[chain]) if chain in index else None

    return find


def attach_references(scorers: dict, source, reference=None) -> None:
    """Give the scorers that measure against a reference their references: `reference` (one image
    for every plain image) or each chain's step 0 in `source`. With the bare edit_damage beside its
    companion on one device in exact precision, both share one measurement of each image. Logs
    what the bare score is worth when it goes out alone."""
    from banana100.metrics.detector.evidence import alone_warning
    from banana100.metrics.detector.relative import BARE, NAME, RelativeScorer, SharedBareScorer

    rel = scorers.get(NAME)
    if rel is not None:
        if reference is not None:
            rel.find_reference = lambda record, ref=reference: (str(ref), ref)
        else:
            rel.find_reference = chain_sources(source)
        bare = scorers.get(BARE)
        if (isinstance(rel, RelativeScorer) and bare is not None and bare.backend == "native"
                and bare.precision == "exact" and bare.device == rel.device):
            scorers[BARE] = SharedBareScorer(bare, rel)  # one measurement of each image for both scores
    elif BARE in scorers:
        log.warning("%s", alone_warning())
