"""Regenerate the stored reference values the fast test tier compares against (tests/data/).

    python tests/regenerate_reference_data.py snapshot   # the native metrics' own scores
    python tests/regenerate_reference_data.py pyiqa [--metrics brisque,niqe]   # pyiqa's scores (deep extra)

`snapshot` (tests/data/native_scores_snapshot.json): the native PIQE, NIQE, BRISQUE and IL-NIQE
scores and flat shares of `banana100.testing.images.snapshot_images` (mode "pyiqa", CPU, two
threads), one image at a time and a batch of three mixed frames. tests/test_native_snapshot.py
checks them bit for bit: rerun only when a change is meant to move a score, and say why in the
commit. `pyiqa` (tests/data/pyiqa_reference_scores.json): what pyiqa itself gives on the same
images and on the reference images of ../shared, the values the native fidelity tests compare
against without computing pyiqa (tests/referencedata.py). Floats are stored with repr (exact
round trip), NaN as null. Both need the parameter files of ../shared/iqa-params.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(DATA.parent))  # referencedata, run as a script
from repopaths import SHARED
PARAMS = SHARED / "iqa-params"
FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"), "niqe": ("niqe_modelparameters.mat",),
         "piqe": (), "ilniqe": ("ILNIQE_templateModel.mat",)}
SNAPSHOT = DATA / "native_scores_snapshot.json"
# IL-NIQE is slow: one chain frame, one flat frame and the hard images
ILNIQE_IMAGES = (0, 3, 6, 7, 8, 9, 10)
BATCH = (0, 3, 4)


def floats(t: torch.Tensor) -> list:
    return [None if math.isnan(v) else v for v in torch.as_tensor(t).double().reshape(-1).tolist()]


def native_snapshot(params: Path = PARAMS, metrics=tuple(FILES)) -> dict:
    """{"<metric>/<image index>" or "<metric>/batch": {"scores", "flat_share"}} from the code as it is."""
    from banana100.metrics import native
    from banana100.metrics.engine.scorer import to_tensor
    from banana100.testing.images import snapshot_images

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the summation order of some CPU kernels depends on the thread count
    try:
        imgs = snapshot_images()
        rows = {}
        for metric in metrics:
            model = native.build(metric, {f: params / f for f in FILES[metric]}, "pyiqa")
            for k, a in enumerate(imgs):
                if metric == "ilniqe" and k not in ILNIQE_IMAGES:
                    continue
                with torch.no_grad():
                    s = model(to_tensor(a)[None])
                rows[f"{metric}/{k}"] = {"scores": floats(s), "flat_share": floats(model.last_flat_share)}
            x = torch.stack([to_tensor(imgs[k]) for k in BATCH])
            with torch.no_grad():
                s = model(x)
            rows[f"{metric}/batch"] = {"scores": floats(s), "flat_share": floats(model.last_flat_share)}
        return rows
    finally:
        torch.set_num_threads(threads)


def snapshot_platforms() -> dict[str, dict]:
    """{CPU platform: snapshot entries} as stored. The float results follow the CPU's kernels
    (scores move by up to ~1e-3 between CPUs, flat shares by a few windows), so each CPU has its
    own entries; a file from before platforms were recorded is one entry of unknown platform."""
    if not SNAPSHOT.is_file():
        return {}
    data = json.loads(SNAPSHOT.read_text())
    return data["platforms"] if "platforms" in data else {UNRECORDED: data}


UNRECORDED = "not recorded (the first snapshot, 2026-12-03)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["snapshot", "pyiqa"])
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--metrics", default="brisque,niqe,piqe,ilniqe", help="pyiqa: the metrics to recompute")
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    if args.what == "snapshot":
        from referencedata import cpu_platform

        rows = native_snapshot(args.params)
        platforms = snapshot_platforms()
        platforms[cpu_platform()] = rows  # this CPU's entry; the others stay as stored
        SNAPSHOT.write_text(json.dumps({"platforms": platforms}, indent=1) + "\n")
        print(f"{len(rows)} entries for {cpu_platform()} written to {SNAPSHOT}")
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from referencedata import regenerate

        print(regenerate(args.params, tuple(args.metrics.split(","))))


if __name__ == "__main__":
    main()
