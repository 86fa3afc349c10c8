"""`banana100 demo`: the whole path, offline, in a few minutes on two CPU cores.

Bundled scikit-image sample images -> simulated-editor chains -> Hub-ready dataset folder ->
scores of the classical metrics whose parameter files are at hand -> sensitivity report.
Every stage resumes, so rerunning the command after an interruption continues.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from banana100 import about
# The drawn sources live in banana100.synth; re-exported here for older imports.
from banana100.synth import GENERATED_SOURCES, GENERATED_SOURCES_LICENCE, generated_source, generated_sources  # noqa: F401

# (file in skimage's bundled data folder, licence). No human faces, as in Banana100's sources.
SAMPLE_IMAGES = (
    ("coffee.png", "CC0 (Rachel Michetti)"),
    ("rocket.jpg", "public domain (SpaceX)"),
    ("chelsea.png", "CC0 (Stefan van der Walt)"),
    ("brick.png", "CC0 (CC0Textures)"),
    ("grass.png", "CC0 (CC0Textures)"),
    ("gravel.png", "CC0 (CC0Textures)"),
    ("hubble_deep_field.jpg", "public domain (NASA)"),
)
# Fast classical metrics tried by `--metrics auto`; IL-NIQE (~0.6 s an image natively) is opt-in.
AUTO_METRICS = ("piqe", "niqe", "brisque")
# The detector needs no file: `demo` (auto) always scores it beside them, so that even offline with
# no parameter file the report shows PIQE missing the damage and edit_damage (and edit_damage_rel,
# the damage added since step 0) catching it.
from banana100.metrics.detector.model import NAME as DETECTOR  # noqa: E402

log = logging.getLogger(__name__)


def sample_sources(folder: Path, n: int) -> Path:
    """Copy the first n sample images into `folder` (unchanged bytes)."""
    import skimage.data

    if not 1 <= n <= len(SAMPLE_IMAGES):
        from banana100.errors import Banana100Error

        raise Banana100Error(f"--chains must be between 1 and {len(SAMPLE_IMAGES)} (one chain per sample image)")
    folder.mkdir(parents=True, exist_ok=True)
    for name, _ in SAMPLE_IMAGES[:n]:
        target = folder / name
        if not target.exists():
            shutil.copyfile(Path(skimage.data.data_dir) / name, target)
    return folder



def pick_metrics(requested: str) -> list[str]:
    """'auto' -> the fast classical metrics whose files are at hand or fetched now (small parameter
    files, when online; metrics.athand); else the list."""
    from banana100.metrics.resolve import parse_metrics
    from banana100.metrics.athand import metrics_at_hand
    from banana100.scoring import check_metrics_ready

    if requested != "auto":
        chosen = parse_metrics(requested)  # the table, pyiqa:<id>, or the user's own evaluate module
        check_metrics_ready(chosen)  # before anything is generated
        return chosen
    return metrics_at_hand(AUTO_METRICS)


def chain_montage(run_dir: Path, chain_id: str, out_path: Path, steps=(0, 1, 5, 10, 20, 50, 100), height=220) -> Path | None:
    """Save the chain's images at `steps` side by side, labelled; None when the chain is missing."""
    from PIL import Image, ImageDraw

    from banana100.chains.manifest import image_path, read_manifest

    records = {r["step"]: r for r in read_manifest(run_dir) if r["chain_id"] == chain_id}
    shown = [s for s in steps if s in records]
    if not shown:
        return None
    tiles = []
    for s in shown:
        img = Image.open(image_path(run_dir, records[s])).convert("RGB")
        img = img.resize((max(1, round(img.width * height / img.height)), height))
        ImageDraw.Draw(img).text((6, 4), f"step {s}", fill=(255, 255, 0))
        tiles.append(img)
    canvas = Image.new("RGB", (sum(t.width for t in tiles) + 4 * (len(tiles) - 1), height), "white")
    x = 0
    for t in tiles:
        canvas.paste(t, (x, 0))
        x += t.width + 4
    out_path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(out_path)
    return out_path


def run_demo(out: Path = Path("demo_output"), steps: int = 20, chains: int = 4, metrics: str = "auto") -> Path:
    """Every stage on the sample images; return the report's path. Each stage is logged (INFO)."""
    from banana100.dataset.build import build_dataset
    from banana100.chains.editors import make_editor
    from banana100.protocol import DEFAULT_CHECK_STEPS, check_steps_for
    from banana100.report import write_report
    from banana100.chains.runner import generate_chains
    from banana100.schema import chain_id
    from banana100.scoring import score_to_parquet

    out = Path(out)
    chosen = pick_metrics(metrics)
    if metrics == "auto":
        chosen = [*chosen, DETECTOR]
    if not chosen:
        from banana100.errors import Banana100Error

        raise Banana100Error("no metric to run: give --metrics, or make parameter files available")
    log.info("%d chains x %d steps with the simulated editor; metrics: %s", chains, steps, ", ".join(chosen))
    log.info("%s", about.SIMULATED_EDITOR_NOTE)
    sources = sample_sources(out / "sources", chains)
    run_dir = out / "run"
    summary = generate_chains(make_editor("simulated"), sources=sources, setting="replicate", steps=steps, repeats=1,
                              out_dir=run_dir)
    log.info("%s", summary)
    # the card states each sample image's own licence (the simulated chains keep it)
    dataset = build_dataset([run_dir], out / "dataset",
                            source_licences={Path(name).stem: licence for name, licence in SAMPLE_IMAGES})
    log.info("dataset folder %s (datasets.load_dataset(%r))", dataset, str(dataset))
    scores = score_to_parquet(dataset, chosen, out / "scores.parquet", device="cpu")
    first = Path(SAMPLE_IMAGES[0][0]).stem
    montage = chain_montage(run_dir, chain_id(first, "replicate", 0), out / "report" / "chain.png",
                            steps=sorted({0, 1, 5, 10, 20, steps // 2, steps}))
    # chains shorter than the paper's 20 steps are checked at steps that fit them (2, 5, 10 for 10)
    check_steps = check_steps_for(steps) or DEFAULT_CHECK_STEPS
    if check_steps != DEFAULT_CHECK_STEPS:
        log.info("chains of %d steps are checked at steps %s (the paper's: %s)", steps,
                 ", ".join(map(str, check_steps)), ", ".join(map(str, DEFAULT_CHECK_STEPS)))
    return write_report(scores, out / "report", montage=montage, check_steps=check_steps)
