"""Time one simulated-editor step at 512x512 on one core (target: well under 0.1 s).

    OMP_NUM_THREADS=1 taskset -c 0 python -m bench.generation.bench_simulated [--steps 50] [--size 512]
"""

import argparse
import time

import numpy as np
import skimage.data
from PIL import Image

from banana100.chains.editors import make_editor
from banana100.chains.editors.base import EditRequest
from banana100.chains.settings import get_setting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--size", type=int, default=512)
    args = ap.parse_args()
    img = np.asarray(Image.fromarray(skimage.data.coffee()).resize((args.size, args.size)))
    editor = make_editor("simulated")
    setting = get_setting("replicate")

    def step(image, k):
        req = EditRequest(image=image, prompt=setting.prompt(k), seed=k, config=dict(setting.config),
                          simulate=dict(setting.simulate), step=k)
        return editor.edit(req).image

    img = step(img, 1)  # warm-up
    t0 = time.perf_counter()
    for k in range(2, args.steps + 2):
        img = step(img, k)
    per_step = (time.perf_counter() - t0) / args.steps
    print(f"simulated editor, {args.size}x{args.size}: {1000 * per_step:.1f} ms per step over {args.steps} chained steps")


if __name__ == "__main__":
    main()
