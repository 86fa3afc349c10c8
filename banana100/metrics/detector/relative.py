"""edit_damage relative to a source (`edit_damage_rel`): the damage an edit added since the image it started from.

The bare detector (`model`) judges one image alone, where an image's own content (film grain, a tinted scene, a
soft photograph, a smooth render) reads as damage. Given the reference an edit started from (a chain's step 0,
or any earlier step), each component is compared with the reference's own (`relative_components`), over its
stated unit (`REL_UNITS`), and summed; 0 = nothing added. Only image statistics are compared, never pixels; a
reference of another size is first resized (Lanczos, aspect kept) to the image's pixel count. Why each
comparison is what it is: docs/edit-damage.md.

Here: the model of the comparison and the scorers (`RelativeScorer`; `SharedBareScorer`, the bare score from the
same measurement). `banana100 score` writes it as its own metric beside the bare one (the table's `companion`
of edit_damage): for chains the reference is step 0 of the same `chain_id` (`banana100.scoring.references`
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


NAME = ed.REL_NAME
BARE = ed.NAME
SAME_SIZE = 0.25  # a reference whose pixel count differs by more than this share is resized first: resampling
# moves the content's specks and fine periodic detail more than a crop of up to a quarter of the pixels does


def spec():
    """The metric table's entry of the bare detector, renamed: same direction, sizes and range."""
    from banana100.metrics.table import get_metric

    return replace(get_metric(BARE), name=NAME, display_name="Edit damage vs source")


# a statistic of the same content moves a little under a crop or a shift (the floor of a small image's
# flattest tiles by up to a tenth): what is compared in quadrature must rise by more than this share of the
# reference's own to count
TOLERANCE = 0.1


# the lattice's amplitude is also the content's own periodic part (a drawn grid, a JPEG's blocks, a facade), which
# damage that changes the content's contrast rescales rather than adds to. Over the source's own: a re-render alone
# 1.11 at the 95th percentile of sources, the first step of a signature that adds no lattice 1.08-1.18 there and
# up to 1.33-1.43 (a flattened drawn grid, a halo on a photograph), which read as a lattice added at step 1 and
# failed the chain (since version 12; bench/detector/component_variants.py, docs/edit-damage-history.md)
LATTICE_TOLERANCE = 0.25


def _added(level: float, own: float, tolerance: float = TOLERANCE) -> float:
    """What was added to a reference's own `own` to make `level`, in quadrature (independent sources of
    variation add their energies): a smooth source's floor of 0 and a photograph's of 3 levels both read the
    added grain itself, not its share of the source's."""
    return math.sqrt(max(0.0, level * level - (own * (1 + tolerance)) ** 2))


def _rise(level: float, own: float) -> float:
    """What a statistic rose by beyond the reference's own `own` and the share it moves by on the same content
    (TOLERANCE of it): on a smooth source that has nothing to lose, the first step's small move of a ratio is
    not damage."""
    return max(0.0, level - own - TOLERANCE * abs(own))


# simplification is in halvings (a log2 scale): the same tolerance, a tenth of the amplitude, is log2(1.1) there
HALVINGS_TOLERANCE = math.log2(1 + TOLERANCE)


def relative_components(stats: dict, ref: dict) -> dict[str, float]:
    """What was added since the reference, per component, in the component's own units: grain and the
    lattice's amplitude (lattice_level) against the reference's own in quadrature (the lattice beyond a quarter
    of its own, LATTICE_TOLERANCE); the cast as the length of
    the move of its vector; the other components' rise beyond the reference's own by more than a statistic
    moves on the same content (TOLERANCE; the crease read edge by edge, crease_edges; simplification: the
    texture lost since it, beyond a tenth of the amplitude)."""
    out = {
        "grain": _added(stats["grain"], ref["grain"]),
        "lattice": _added(stats[ed.REL_COMPONENT["lattice"]], ref[ed.REL_COMPONENT["lattice"]], LATTICE_TOLERANCE),
        "colour_cast": math.hypot(stats["cast"][0] - ref["cast"][0], stats["cast"][1] - ref["cast"][1]),
    }
    # each term from its own component, or the one REL_COMPONENT names (the crease edge by edge, not the bare
    # score's mean profile: against the source, a photograph's texture beside its edges cancels, and a line beside
    # a few of its contours still counts)
    read = lambda t: ed.REL_COMPONENT.get(t, t)  # noqa: E731
    out.update({t: _rise(stats[read(t)], ref[read(t)]) for t in ("softness", "crease", "speckles", "blocking")})
    if ref["softness"] == 0:
        # a reference without an edge of 1 level a pixel (a soft render) has no softness to compare with: its 0 is
        # "not measured", not "sharp", and the first edges an edit makes (JPEG's block edges) would read as blur
        out["softness"] = 0.0
    # a reference without enough structured tiles (a soft render) has simplification 0, "not measured": texture an
    # edit loses cannot be read against it (since version 9)
    out["simplification"] = 0.0 if ref["simplification"] == 0 else max(
        0.0, stats["simplification"] - ref["simplification"] - HALVINGS_TOLERANCE)
    # colour edges blurred (since version 11): JPEG codes colour at half resolution and each save blurs it again,
    # where an editor's re-render blurs luma and colour alike; as softness, not compared where the reference has no
    # colour edge (a grey image's 0 is "not measured")
    own = ref.get("colour_softness", 0.0)
    out["colour_softness"] = 0.0 if not own else _rise(stats["colour_softness"], own)
    return out


# the relative score's terms: the bare score's, and those only it reads (ed.REL_ONLY_UNITS)
REL_TERMS = (*ed.TERMS, *ed.REL_ONLY_UNITS)
# colour edges blurred count half as much as the luma's (since version 13): the eye resolves colour at about half the
# luma's resolution, which is why JPEG and video code it at half (4:2:0), so the same blur is about half as visible.
# At softness's unit the first save's colour blur lifted JPEG chains' step 1 above many of the other signatures'
# step 10 (bench/detector/component_variants.py, told settings; docs/edit-damage.md)
COLOUR_SOFTNESS_UNIT = 2 * ed.UNITS["softness"][1]
# each relative term's stated unit: the lattice's is that of its amplitude; colour edges', COLOUR_SOFTNESS_UNIT
REL_UNITS = {**{n: ed.UNITS[n][1] for n in ed.TERMS}, "lattice": ed.UNITS["lattice_level"][1],
             "colour_softness": COLOUR_SOFTNESS_UNIT}


def relative_terms(added: dict) -> dict[str, float]:
    """Each component's term of the relative score, from what it added (`relative_components`): the change
    over its stated unit (REL_UNITS; not the bare score's BARE_UNITS: against a source, a cast or lattice that
    moved is the edit's). `added` may hold more (a scores file's row: texture and evenness, null); a row
    written before a term existed counts it 0."""
    return {n: (added.get(n) or 0.0) / REL_UNITS[n] for n in REL_TERMS}


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
        self.model.colour_edges = True  # the relative score's own component too (ed.REL_ONLY_UNITS)
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
        """Each array's statistics. The batches' components stay on the device until every batch has run, then
        come back in one transfer (a copy to the CPU after each batch would be a wait per batch on a GPU)."""
        from banana100.metrics.engine.scorer import to_tensor

        by_size: dict[tuple, list[int]] = {}
        for i, a in enumerate(arrays):
            by_size.setdefault(a.shape[:2], []).append(i)
        order: list[int] = []
        parts: list[torch.Tensor] = []  # per batch (B, len(COMPONENTS) + 2): the components, then the cast
        with torch.inference_mode():
            for idx in by_size.values():
                for k in range(0, len(idx), self.batch_size):
                    part = idx[k:k + self.batch_size]
                    self.model(torch.stack([to_tensor(arrays[i]) for i in part]).to(self.device))
                    comps = self.model.last_components
                    parts.append(torch.cat([torch.stack([comps[c] for c in ed.ALL_COMPONENTS], 1), self.model.last_cast], 1))
                    order += part
        if not parts:
            return []
        rows = torch.cat(parts).cpu().tolist()  # the one transfer
        out: list[dict | None] = [None] * len(arrays)
        n = len(ed.ALL_COMPONENTS)
        for i, row in zip(order, rows, strict=True):
            out[i] = {**dict(zip(ed.ALL_COMPONENTS, row[:n], strict=True)), "cast": tuple(row[n:])}
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
