"""Snapshot of the native metrics' scores and flat shares, to check that a speed change keeps them
bit for bit (issue 12).

    python bench/native_scores_snapshot.py save before.json [--metrics brisque,niqe,piqe]
    ... change the code ...
    python bench/native_scores_snapshot.py save after.json
    python bench/native_scores_snapshot.py compare before.json after.json

Images: 3 frames of the coffee chain and 3 of its flat variant at 512 px (bench_native), a uniform
grey, a horizontal ramp, a checkerboard, noise with a black half, saturated noise; one at a time
(mode "pyiqa", CPU, the module called directly) and a batch of 3 mixed 512 px frames. Floats are
stored with repr (exact round trip), NaN as null.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO.parent / "shared" / "iqa-params"
FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"), "niqe": ("niqe_modelparameters.mat",),
         "piqe": (), "ilniqe": ("ILNIQE_templateModel.mat",)}


def images() -> list[np.ndarray]:
    from bench_native import chain_images, flat_chain_images

    rng = np.random.default_rng(0)
    out = chain_images(3, 512) + flat_chain_images(3, 512)
    out.append(np.full((200, 300, 3), 128, np.uint8))
    out.append(np.tile(np.arange(256, dtype=np.uint8)[None, :, None], (96, 1, 3)))
    board = ((np.indices((128, 160)).sum(0) % 2) * 255).astype(np.uint8)
    out.append(np.stack([board] * 3, -1))
    half = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    half[:96] = 0
    out.append(half)
    out.append(np.clip(rng.normal(128, 200, (160, 224, 3)), 0, 255).astype(np.uint8))
    return out


def _floats(t: torch.Tensor) -> list:
    return [None if math.isnan(v) else v for v in t.double().tolist()]


def save(path: Path, metrics: list[str], params: Path) -> None:
    try:
        from banana100.metrics import native
        from banana100.metrics.engine import to_tensor
    except ImportError:  # a checkout from before the regroup of issue 14
        from banana100 import native
        from banana100.engine import to_tensor

    torch.set_num_threads(2)
    imgs = images()
    rows = {}
    for metric in metrics:
        model = native.build(metric, {f: params / f for f in FILES[metric]}, "pyiqa")
        # IL-NIQE is slow: one chain frame, one flat frame and the hard images
        chosen = imgs if metric != "ilniqe" else imgs[:1] + imgs[3:4] + imgs[6:]
        for k, a in enumerate(chosen):
            with torch.no_grad():
                s = model(to_tensor(a)[None])
            rows[f"{metric}/{k}"] = {"scores": _floats(s), "flat_share": _floats(model.last_flat_share)}
        x = torch.stack([to_tensor(a) for a in (imgs[0], imgs[3], imgs[4])])
        with torch.no_grad():
            s = model(x)
        rows[f"{metric}/batch"] = {"scores": _floats(s), "flat_share": _floats(model.last_flat_share)}
    path.write_text(json.dumps(rows, indent=1) + "\n")
    import banana100

    print(f"{len(rows)} entries written to {path} (banana100 from {Path(banana100.__file__).parent})")


def compare(a: Path, b: Path) -> int:
    old, new = json.loads(a.read_text()), json.loads(b.read_text())
    common = sorted(set(old) & set(new))
    differ = [k for k in common if old[k] != new[k]]
    for k in differ:
        print(f"{k}: {old[k]} -> {new[k]}")
    print(f"{len(common)} entries compared, {len(differ)} differ")
    return 1 if differ or not common else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("out", type=Path)
    s.add_argument("--metrics", default="brisque,niqe,piqe")
    s.add_argument("--params", type=Path, default=PARAMS)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "save":
        save(args.out, args.metrics.split(","), args.params)
    else:
        sys.exit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
