"""edit_damage relative to a source: the damage an edit added since the image it started from.

The bare detector (`edit_damage.py`) judges one image alone, and an image's own content (film
grain, a tinted scene, a soft photograph) reads as damage there. Given the reference an edit
started from (a chain's step 0, or any earlier step), each component is compared with the
reference's own value, so what the source already had does not count:

- grain: max(0, grain - grain_ref) / 2 levels (linear, not in quadrature: the noise floor of
  the flattest tiles moves by a few tenths of a level under a crop of a small image, and a
  quadrature difference would blow that up);
- lattice: max(0, lattice - lattice_ref) / 0.2;
- colour_cast: the length of the change of the (Cb, Cr) cast vector, / 2 levels (a tint that
  turns the reference's own cast counts, not only one that lengthens it);
- softness: max(0, softness - softness_ref) / 0.1.

Only image statistics are compared, never pixels: a crop, a shift, a mirror or new content
between the two move the score only as far as they move those statistics. A reference of
another size is first resized (Lanczos, aspect kept) to the image's pixel count, so that grain is
measured at the same scale. The score is the sum of the four terms; 0 = nothing added.

`banana100 score` writes it as its own metric, `edit_damage_rel`, beside the bare `edit_damage`
(the table's `companion` of edit_damage): for chains the reference is step 0 of the same
`chain_id` (its statistics computed once per chain and size; `banana100.scoring.references`
finds it), for plain images the one given by `--reference`.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Callable

import numpy as np
import torch

from banana100.errors import Banana100Error, ImageReadError, ScoreUndefinedError
from banana100.metrics.detector import model as ed
from banana100.metrics.engine.contract import Scorer, Scores, check_size, image_names


NAME = "edit_damage_rel"
BARE = "edit_damage"
SAME_SIZE = 0.05  # a reference whose pixel count differs by more than this share is resized first


def spec():
    """The metric table's entry of the bare detector, renamed: same direction, sizes and range."""
    from banana100.metrics.table import get_metric

    return replace(get_metric(BARE), name=NAME, display_name="Edit damage vs source")


def relative_components(stats: dict, ref: dict) -> dict[str, float]:
    """What was added since the reference, per component, in the component's own units."""
    return {
        "grain": max(0.0, stats["grain"] - ref["grain"]),
        "lattice": max(0.0, stats["lattice"] - ref["lattice"]),
        "colour_cast": math.hypot(stats["cast"][0] - ref["cast"][0], stats["cast"][1] - ref["cast"][1]),
        "softness": max(0.0, stats["softness"] - ref["softness"]),
    }


def relative_terms(added: dict) -> dict[str, float]:
    """Each component's term of the relative score, from what it added (`relative_components`): the change
    over its stated unit (edit_damage.UNITS; not the bare score's BARE_UNITS: against a source, a cast or
    lattice that moved is the edit's). `added` may hold more (a scores file's row: texture and evenness, null)."""
    return {n: added[n] / ed.UNITS[n][1] for n in ed.TERMS}


def relative_score(stats: dict, ref: dict) -> float:
    """The damage added since the reference: the sum of the terms."""
    return sum(relative_terms(relative_components(stats, ref)).values())


class StatsModel:
    """The detector's component statistics of images (batched by size on `device`).

    Calls with `share=True` (each metric's own images, not references) keep their images'
    statistics until the next such call, and reuse them for the same arrays: scoring `edit_damage`
    beside `edit_damage_rel` (`SharedBareScorer`) measures each image once."""

    def __init__(self, device=None, batch_size: int = 8):
        from banana100.metrics import native
        from banana100.metrics.engine.scorer import check_device

        self.device = check_device(device)
        self.batch_size = max(1, int(batch_size))
        # through the native builder: IEEE float32 whatever the user's TF32 flags, as the engine's
        self.model = native.build(BARE, {}).to(self.device)
        self._held: dict[int, tuple[np.ndarray, dict]] = {}  # id -> (array, its statistics)

    def __call__(self, arrays: list[np.ndarray], share: bool = False) -> list[dict]:
        out: list[dict | None] = [None] * len(arrays)
        if share:
            for i, a in enumerate(arrays):
                held = self._held.get(id(a))
                if held is not None and held[0] is a:  # the same array object, not a reused id
                    out[i] = held[1]
        todo = [i for i, st in enumerate(out) if st is None]
        for i, st in zip(todo, self._measure([arrays[i] for i in todo]), strict=True):
            out[i] = st
        if share:
            self._held = {id(a): (a, st) for a, st in zip(arrays, out, strict=True)}
        return out  # type: ignore[return-value]

    def _measure(self, arrays: list[np.ndarray]) -> list[dict]:
        from banana100.metrics.engine.scorer import to_tensor

        out: list[dict | None] = [None] * len(arrays)
        by_size: dict[tuple, list[int]] = {}
        for i, a in enumerate(arrays):
            by_size.setdefault(a.shape[:2], []).append(i)
        with torch.inference_mode():
            for idx in by_size.values():
                for k in range(0, len(idx), self.batch_size):
                    part = idx[k:k + self.batch_size]
                    x = torch.stack([to_tensor(arrays[i]) for i in part]).to(self.device)
                    self.model(x)
                    comps = {c: v.tolist() for c, v in self.model.last_components.items()}
                    cast = self.model.last_cast.tolist()
                    for j, i in enumerate(part):
                        out[i] = {**{c: comps[c][j] for c in ed.COMPONENTS}, "cast": tuple(cast[j])}
        return out  # type: ignore[return-value]


def _resized(reference: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The reference scaled (aspect kept) to about the pixel count of `shape`, if it differs by more than SAME_SIZE."""
    h, w = reference.shape[:2]
    ratio = (shape[0] * shape[1]) / (h * w)
    if abs(ratio - 1) <= SAME_SIZE:
        return reference
    from PIL import Image

    s = math.sqrt(ratio)
    size = (max(ed.MIN_SIDE, round(w * s)), max(ed.MIN_SIDE, round(h * s)))
    return np.asarray(Image.fromarray(reference).resize(size, Image.LANCZOS))


class RelativeScorer(Scorer):
    """`edit_damage_rel` behind the scorer contract, plus what it needs: each image's reference.

    `measure_against(images, references)` takes the references directly (images or arrays, one per
    image, or one for all); inside `banana100 score` the feed passes each image's manifest record
    instead (`records=`), and `find_reference(record)` (set by `banana100.scoring`) returns
    `(key, image)` for it, or None. A reference's statistics are cached per (key, size), so a
    chain's source is measured once however many steps are scored.
    """

    backend = "native"
    mode = "pyiqa"
    needs_reference = True

    def __init__(self, device=None, batch_size: int = 8):
        self.spec = spec()
        self.stats = StatsModel(device, batch_size)
        self.device, self.batch_size = self.stats.device, self.stats.batch_size
        self.find_reference: Callable[[dict], tuple[str, object] | None] | None = None
        self._cache: dict[tuple, dict] = {}

    def measure_against(self, images, references) -> Scores:
        """Scores of `images` (paths, bytes, PIL images or arrays) against `references` (one, or one
        per image): the damage each added since its reference."""
        from banana100.imageio import load_rgb

        images = list(images)
        references = _broadcast(references, len(images))
        loaded: dict[int, np.ndarray] = {}  # one reference for many images is read (and measured) once
        for r in references:
            if id(r) not in loaded:
                loaded[id(r)] = load_rgb(r)
        arrays = [load_rgb(i) for i in images]
        return self.measure(arrays, image_names(images), references=[loaded[id(r)] for r in references])

    def score(self, images, references=None) -> list[float]:
        """`measure_against(images, references)`'s scores; one error naming each image without one."""
        if references is None:
            raise ValueError(f"{NAME}: give the references the images were edited from (references=...)")
        return self.measure_against(images, references).values(f" ({NAME})")

    def reference_stats(self, key, image, shape, cache: dict | None = None) -> dict:
        """The statistics of a reference, cached in `cache` (default: this scorer's, across calls)
        by `key` and the size it is measured at."""
        from banana100.imageio import load_rgb

        cache = self._cache if cache is None else cache
        ck = (key, tuple(shape[:2]))
        if ck not in cache:
            rgb = load_rgb(image)
            check_size(self.spec, rgb, f"the reference {key}")
            cache[ck] = self.stats([_resized(rgb, shape)])[0]
        return cache[ck]

    def measure(self, arrays, names, records=None, references=None) -> Scores:
        arrays, names = list(arrays), list(names)
        failed: dict[int, Banana100Error] = {}
        refs: list[tuple | None] = [None] * len(arrays)
        call_cache: dict = {}  # references given to this call: each measured once per size, then dropped
        stats = self.stats(arrays, share=True)  # measured already when edit_damage scored them
        if references is not None:
            refs = [(f"#{id(r)}", r) for r in _broadcast(references, len(arrays))]
        elif records is not None:
            refs = [self._record_reference(r, a, st) for r, a, st in zip(records, arrays, stats, strict=True)]
        scores: list[float | None] = [None] * len(arrays)
        components: list[dict | None] = [None] * len(arrays)
        for i, (st, ref) in enumerate(zip(stats, refs, strict=True)):
            if ref is None:
                failed[i] = ScoreUndefinedError(f"{names[i]}: no reference to measure the damage from (a chain's "
                                                "step 0, or --reference for plain images)")
                continue
            try:
                base = st if ref[0] == "self" else self.reference_stats(
                    ref[0], ref[1], arrays[i].shape, call_cache if references is not None else None)
            except (Banana100Error, OSError) as e:
                failed[i] = ImageReadError(f"{names[i]}: its reference could not be used: {e}")
                continue
            components[i] = relative_components(st, base)
            scores[i] = relative_score(st, base)
        return Scores(scores, failed, components=components)

    def _record_reference(self, record: dict, rgb: np.ndarray, stats: dict):
        chain = record.get("chain_id")
        if chain is not None and record.get("step") == 0:
            # the chain's own source, in this chunk: cache it now so the later steps need not read it
            self._cache.setdefault((chain, rgb.shape[:2]), stats)
            return ("self", None)
        found = self.find_reference(record) if self.find_reference is not None else None
        return found


class SharedBareScorer(Scorer):
    """`edit_damage`, the bare score, from the statistics `edit_damage_rel` measures of the same
    images anyway (`StatsModel(share=True)`): with both metrics each image is measured once, not
    twice. Scores equal the engine's (same module, same float input, same combination);
    `banana100.scoring` puts it in place of the engine's scorer when both are scored on one device
    in exact precision."""

    def __init__(self, engine_scorer, rel: "RelativeScorer"):
        self.spec = engine_scorer.spec
        self.backend, self.mode, self.precision = engine_scorer.backend, engine_scorer.mode, engine_scorer.precision
        self.device, self.batch_size = rel.device, rel.batch_size
        self.stats = rel.stats

    def measure(self, arrays, names, records=None) -> Scores:
        arrays, names = list(arrays), list(names)
        stats = self.stats(arrays, share=True)
        comps = {c: torch.tensor([st[c] for st in stats], dtype=torch.float64) for c in ed.COMPONENTS}
        scores = ed.combine(comps).tolist()
        failed = {i: ScoreUndefinedError(f"{names[i]}: {self.spec.display_name} gave {s} for this image")
                  for i, s in enumerate(scores) if not math.isfinite(s)}
        return Scores(scores, failed, components=[{c: st[c] for c in ed.COMPONENTS} for st in stats])


def _broadcast(references, n: int) -> list:
    if isinstance(references, (str, os.PathLike, bytes, np.ndarray)) and not (
            isinstance(references, np.ndarray) and references.ndim == 4):
        return [references] * n
    try:
        from PIL import Image

        if isinstance(references, Image.Image):
            return [references] * n
    except ImportError:  # pragma: no cover
        pass
    references = list(references)
    if len(references) == 1:
        return references * n
    if len(references) != n:
        raise ValueError(f"{NAME}: {len(references)} references for {n} images (give one, or one per image)")
    return references


def _heldout_auc() -> str:
    """The bare score's measured clean-vs-damaged AUC on held-out chains (the validation file), one a
    draw, and by kind of source where measured, for the warning."""
    from banana100.metrics.detector.card import _results, heldout_aucs_text, heldout_by_source

    try:
        r = _results("edit_damage_validation.json")
        by_source = heldout_by_source(r)
        return (heldout_aucs_text(r) + (f"; {by_source[0]} on made images, {by_source[1]} on photographs"
                                        if by_source else "")) or "not measured"
    except (OSError, KeyError, ValueError):
        return "not measured"


def alone_note() -> str:
    """What the bare score is worth on its own, measured: said where a user sees it scored alone
    (`score`'s log and the note under its table)."""
    return ("edit_damage is scored without a reference: alone it tells clean from strongly damaged images "
            f"(clean vs step 10 ROC AUC on held-out chains, one figure a draw: {_heldout_auc()}), faint damage far "
            f"less ({_faint_auc()}; docs/edit-damage.md); within a chain, or with --reference, edit_damage_rel "
            "measures the damage added since the source")


def _faint_auc() -> str:
    """The bare score's clean-vs-damaged AUC on the validator's faint step-5 stand-ins, for the warning."""
    from banana100.metrics.detector.card import _results

    try:
        return f"step-5 stand-ins: {_results('edit_damage_validation.json')['clean_vs_step5']['pooled_auc']:.2f}"
    except (OSError, KeyError, ValueError, TypeError):
        return "step-5 stand-ins: not measured"
