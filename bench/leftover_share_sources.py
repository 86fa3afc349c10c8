"""PIQE's flat share from its own local mean vs from `nss.leftover_share`'s separate filtering.

    python bench/leftover_share_sources.py

`nss.leftover_share` flags a pixel when |y - local mean| <= `leftover_bound` (4x the rounding of
any summation order). PIQE filters the same 7x7 window with the same replicated borders itself
(pyiqa mode: float32 2-D convolution; official: float64 separable passes), so it can hand its
mean over instead of filtering again. This counts, per image and mode, the pixels the two
flag differently (the shares are equal only if that is 0), and the smallest distance of an
unflagged |y - mean| above the bound (how close any pixel came to flipping). Images: the bench
chain and its flat frames at 512 px, the flat-patch and synthetic images of tests/flatimages.py,
exact ramps, tiny and 2K images, noise, a uniform image. Writes bench/results_leftover_share_sources.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]


def images() -> list[tuple[str, np.ndarray]]:
    from bench_native import chain_images, flat_chain_images
    from flatimages import flat_images, large_patch_image, synthetic_images

    out = [(f"chain {k}", a) for k, a in enumerate(chain_images(4, 512))]
    out += [(f"flat chain {k}", a) for k, a in enumerate(flat_chain_images(4, 512))]
    out += flat_images() + synthetic_images()
    out.append(("large flat squares", large_patch_image([40, 153, 255], 320, 100)))
    ramp = np.tile(np.arange(256, dtype=np.uint8), (64, 1))
    out.append(("horizontal ramp", np.repeat(ramp[..., None], 3, axis=2)))
    out.append(("diagonal ramp", np.repeat(((np.add.outer(np.arange(200), np.arange(300)) // 2) % 256)
                                           .astype(np.uint8)[..., None], 3, axis=2)))
    rng = np.random.default_rng(0)
    out.append(("noise 2048x1536", rng.integers(0, 256, (1536, 2048, 3), dtype=np.uint8)))
    out.append(("noise 16x16", rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)))
    out.append(("uniform 128", np.full((128, 128, 3), 128, np.uint8)))
    chain = chain_images(1, 2048)[0]
    out.append(("chain 2048", chain))
    return out


def main() -> None:
    from banana100.metrics.engine import to_tensor
    from banana100.metrics.native import matlab, nss, piqe

    window = matlab.fspecial_gaussian(7, 7 / 6, float32=True)
    bound = nss.leftover_bound(window, torch.float32)
    rows, worst = [], 0
    for name, rgb in images():
        x = to_tensor(rgb)[None]
        for mode in ("pyiqa", "official"):
            model = piqe.build(mode=mode)
            gray = model._pyiqa_gray(x) if mode == "pyiqa" else model._matlab_gray(x)
            _, mu = piqe.local_normalization(gray, model.gauss, float32=mode == "pyiqa")
            y = gray[:, 0]
            y32 = y.to(torch.float32)
            separate = (y32 - matlab.imfilter_symmetric_separable(y32, matlab.gaussian_1d(7, 7 / 6), "replicate")).abs()
            own = (y.to(mu.dtype) - mu[:, 0]).abs()
            differ = int(((separate <= bound) != (own <= bound)).sum())
            above = torch.cat([separate[separate > bound].double(), own[own > bound].double()])
            margin = float(above.min() / bound) if above.numel() else None
            same = torch.equal(nss.leftover_share(y), nss.leftover_share(y, mean=mu[:, 0]))
            rows.append({"image": name, "mode": mode, "pixels": y.numel(), "flagged": int((own <= bound).sum()),
                         "flags_differ": differ, "shares_equal": same, "nearest_unflagged_over_bound": margin})
            worst = max(worst, differ)
            print(f"{name:32s} {mode:8s} flagged {rows[-1]['flagged']:8d}  differ {differ}  "
                  f"nearest unflagged {margin if margin is None else round(margin, 2)}x the bound")
    out = REPO / "bench" / "results_leftover_share_sources.json"
    out.write_text(json.dumps({"bound": bound, "rows": rows}, indent=1) + "\n")
    print(f"{len(rows) // 2} images x 2 modes: at most {worst} pixels flagged differently; written {out}")


if __name__ == "__main__":
    main()
