"""A user's own evaluate module, as docs/own-metric.md shapes it: the toy the tests and the user-module
benchmark load (one copy)."""

from __future__ import annotations

from pathlib import Path

# mean brightness, higher = brighter = 'better' unless LOWER is replaced by True (brightness_module does it)
BRIGHTNESS = '''
import datasets
import evaluate
import numpy as np


class Brightness(evaluate.Metric):
    """Mean brightness: a toy metric of a user's own (higher = brighter = 'better')."""

    def _info(self):
        return evaluate.MetricInfo(description="mean brightness", citation="", inputs_description="",
                                   features=datasets.Features({"images": datasets.Value("string")}))

    def compute(self, *, images=None, **kwargs):
        """Score the images."""
        scores = [float(np.asarray(im, dtype=np.float64).mean()) for im in images]
        return {"metric": "brightness", "scores": scores, "mean": float(np.mean(scores)), "lower_better": LOWER}

    def _compute(self, images):
        raise NotImplementedError
'''


def brightness_module(lower_better: bool = False) -> str:
    """The toy module's source, its direction stated."""
    return BRIGHTNESS.replace("LOWER", str(lower_better))


def write_module(root: Path, name: str, body: str) -> Path:
    """`root/name/name.py` holding `body`: the folder `--metrics ./name` and `resolve` take."""
    folder = root / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(body)
    return folder
