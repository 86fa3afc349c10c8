"""pyiqa's own scores, stored (tests/data/pyiqa_reference_scores.json), so that the fast tier
checks the native metrics' fidelity without pyiqa (the non-commercial 1.1 GB extra) and without
a baseline that moves when pyiqa does. `python tests/regenerate_reference_data.py pyiqa` writes
the file; tests/test_stored_pyiqa_scores.py compares the native metrics against it (fast tier)
and pyiqa against it (integration tier: the stored values are still pyiqa's).

Images: the native snapshot's (`banana100.testing.images.snapshot_images`, keys "snapshot/<k>")
and the reference images of ../shared present here (keys "<folder>/<file>"). IL-NIQE (~10 s an
image in pyiqa) on one chain frame, one flat frame and the two TID2013 images only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent / "data"
STORED = DATA / "pyiqa_reference_scores.json"
from repopaths import SHARED
REFERENCE_IMAGES = SHARED / "reference-images"
REFERENCE_NAMES = ("tid2013/I03.bmp", "tid2013/I04.bmp", "piq/I01.BMP", "piq/goldhill.gif",
                   *(f"ilniqe/pepper_{k}.png" for k in range(5)))
# the native metrics' promises against pyiqa (metric cards, tests/test_native_<metric>.py):
# |native - pyiqa| <= rtol * max(|pyiqa|, floor)
TOLERANCE = {"niqe": (1e-5, 1e-12), "piqe": (1e-3, 1e-12), "ilniqe": (1e-3, 1e-12), "brisque": (1e-2, 1.0)}
PYIQA_FILES = {"brisque": "brisque_svm_weights.pth", "niqe": "niqe_modelparameters.mat",
               "piqe": None, "ilniqe": "ILNIQE_templateModel.mat"}
NATIVE_FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"), "niqe": ("niqe_modelparameters.mat",),
                "piqe": (), "ilniqe": ("ILNIQE_templateModel.mat",)}
# pyiqa's BRISQUE run in float64. pyiqa computes BRISQUE in float32; a fitted shape is the nearest
# point of a 0.001 grid, and where pyiqa's float32 ratio and the native float64 one straddle a
# grid step the score moves by more than the 1e-2 of the promise (pepper_1: 1.5e-2): there pyiqa
# in float64 lands where the native code does, so the promise is checked against either.
BRISQUE_FLOAT64 = "brisque_float64"
ILNIQE_KEYS = ("snapshot/0", "snapshot/3", "tid2013/I03.bmp", "tid2013/I04.bmp")
# pyiqa's own scores move between CPUs (its float32 reductions follow the CPU's kernels): NIQE by
# up to 3.3e-4 (ilniqe/pepper_2) between the machine that stored the file and an AMD EPYC
# (AVX512), both pyiqa 0.1.16 / torch 2.14.1, while native and pyiqa agree to 1e-7 on each. Scores
# stored on another CPU are compared within max(promise, this); on the same CPU, the promise alone.
CROSS_CPU = {"niqe": 5e-4}


def cpu_platform() -> str:
    """What the stored float scores depend on: the CPU's vendor, torch's CPU kernels and version."""
    vendor = ""
    try:
        vendor = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("vendor_id")), "")
    except OSError:
        pass
    import platform

    return f"{vendor or platform.processor() or platform.machine()} {torch.backends.cpu.get_cpu_capability()} " \
           f"torch {'.'.join(torch.__version__.split('.')[:2])}"


def tolerance(metric: str, stored_platform: str | None) -> tuple[float, float]:
    """(rtol, floor) for comparing with scores stored on `stored_platform` (None: not recorded)."""
    rtol, floor = TOLERANCE[metric]
    if stored_platform != cpu_platform():
        rtol = max(rtol, CROSS_CPU.get(metric, 0.0))
    return rtol, floor


def images() -> dict[str, torch.Tensor]:
    """key -> 1x3xHxW float32 in [0, 1], as the engine hands images to a model."""
    from banana100.imageio import load_rgb
    from banana100.metrics.engine.scorer import to_tensor
    from banana100.testing.images import snapshot_images

    out = {f"snapshot/{k}": to_tensor(a)[None] for k, a in enumerate(snapshot_images())}
    for name in REFERENCE_NAMES:
        if (REFERENCE_IMAGES / name).is_file():
            out[name] = to_tensor(load_rgb(REFERENCE_IMAGES / name))[None]
    return out


def keys_for(metric: str, available) -> list[str]:
    return [k for k in available if metric != "ilniqe" or k in ILNIQE_KEYS]


def stored() -> dict:
    return json.loads(STORED.read_text())


def pyiqa_scores(metric: str, params: Path, imgs: dict[str, torch.Tensor], float64: bool = False
                 ) -> dict[str, float | None | dict]:
    """pyiqa's score of each image (one call per image, as pyiqa is used), NaN as None, and
    {"error": <exception class>} where pyiqa raises (a uniform image in NIQE: no score to match).
    `float64`: pyiqa's arch run in float64 (BRISQUE: see BRISQUE_FLOAT64)."""
    import pyiqa

    kw = {"pretrained_model_path": str(params / PYIQA_FILES[metric])} if PYIQA_FILES[metric] else {}
    model = pyiqa.create_metric(metric, device="cpu", **kw)
    out = {}
    for key in keys_for(metric, imgs):
        try:
            with torch.no_grad():
                v = float((model.net(imgs[key].double()) if float64 else model(imgs[key])).reshape(-1)[0])
        except Exception as e:  # noqa: BLE001 - whatever pyiqa raises is recorded, not matched
            out[key] = {"error": type(e).__name__}
            continue
        out[key] = None if math.isnan(v) else v
    return out


def regenerate(params: Path, metrics=tuple(PYIQA_FILES)) -> str:
    """Recompute `metrics` (the others stay as stored) and write the file."""
    import pyiqa

    torch.set_num_threads(2)
    imgs = images()
    old = stored() if STORED.is_file() else {"scores": {}}
    if old.get("pyiqa", pyiqa.__version__) != pyiqa.__version__:
        old, metrics = {"scores": {}}, tuple(PYIQA_FILES)  # a new pyiqa: every metric again
    new = {m: pyiqa_scores(m, params, imgs) for m in metrics}
    if "brisque" in metrics:
        new[BRISQUE_FLOAT64] = pyiqa_scores("brisque", params, imgs, float64=True)
    scores = {**old["scores"], **new}
    STORED.write_text(json.dumps({"pyiqa": pyiqa.__version__, "platform": cpu_platform(), "scores": scores},
                                 indent=1) + "\n")
    return f"{sum(map(len, scores.values()))} pyiqa {pyiqa.__version__} scores in {STORED} ({', '.join(metrics)} new)"
