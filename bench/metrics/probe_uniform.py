"""What each hand-crafted metric returns for uniform images: pyiqa 0.1.16, the native code, banana100.

    BANANA100_WEIGHTS=../shared/iqa-params python -m bench.metrics.probe_uniform [--metrics piqe,niqe,brisque,ilniqe]

For 128 x 128 images of one grey level (0, 1, 128, 254, 255), calls each model directly (what
pyiqa and the native code give, no engine check in between) and then through the engine
(`MetricScorer.score`, what a user gets). Prints a Markdown table for BENCHMARKS.md; the metric
cards quote it (`uniform_note` in banana100/metrics/table.py).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import torch


from banana100.metrics.engine.scorer import MetricScorer, to_tensor  # noqa: E402
from banana100.errors import Banana100Error  # noqa: E402

GREYS = (0, 1, 128, 254, 255)


def show(value) -> str:
    if isinstance(value, BaseException):
        return type(value).__name__.lstrip("_")
    return "NaN" if value != value else f"{value:.2f}"


def raw(scorer: MetricScorer, grey: int):
    x = torch.stack([to_tensor(np.full((128, 128, 3), grey, np.uint8))])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return scorer._forward(x)[0]
    except Exception as e:  # noqa: BLE001 - what the model raises is the answer
        return e


def through_engine(scorer: MetricScorer, grey: int) -> str:
    try:
        return show(scorer.score([np.full((128, 128, 3), grey, np.uint8)])[0])
    except Banana100Error as e:
        return type(e).__name__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque,ilniqe")
    args = ap.parse_args()
    torch.set_num_threads(2)
    print(f"| metric | computed by | grey {' / '.join(map(str, GREYS))} |")
    print("| --- | --- | --- |")
    for metric in args.metrics.split(","):
        setups = [("pyiqa 0.1.16", "pyiqa", "pyiqa"), ("native, mode pyiqa", "native", "pyiqa"),
                  ("native, mode official", "native", "official")]
        for label, backend, mode in setups:
            try:
                scorer = MetricScorer(metric, device="cpu", backend=backend, mode=mode)
            except Banana100Error as e:
                print(f"| {metric} | {label} | skipped: {str(e).splitlines()[0]} |")
                continue
            print(f"| {metric} | {label} | {' / '.join(show(raw(scorer, g)) for g in GREYS)} |", flush=True)
        scorer = MetricScorer(metric, device="cpu")
        print(f"| {metric} | banana100 (`compute`) | {' / '.join(through_engine(scorer, g) for g in GREYS)} |",
              flush=True)


if __name__ == "__main__":
    main()
