"""Flat areas on the GPU: native vs pyiqa on the same device, and pyiqa's CUDA vs CPU (issue 12).

    python -m bench.gpu.gpu_flat_check                 # device cuda (called by bench/gpu/gpu_check.sh)
    python -m bench.gpu.gpu_flat_check --device cpu    # the same checks on CPU (runs anywhere)

Images: flat patches at every grey level 0-255 (two sizes, colour and grey), skimage's
synthetic images and clipped photos (tests/metrics/native/test_native_flat.py makes them). For BRISQUE, NIQE,
PIQE (and IL-NIQE with --ilniqe: slow in pyiqa) and each image, with the parameter files of
--params:

- native (mode "pyiqa") vs pyiqa, both on --device: |a - b| / max(|b|, 1) against the card's
  tolerance (BRISQUE 1e-2, the others 1e-3);
- pyiqa on --device vs pyiqa on CPU: on flat windows pyiqa's leftovers depend on the
  convolution backend (oneDNN, cuDNN with or without TF32), so its score is only defined per
  device; the script measures by how much;
- native vs pyiqa both on CPU with --threads threads (on another machine oneDNN picks other
  kernels: the native repair must follow them);
- the BRISQUE MSCN sign agreement of native and pyiqa on --device at full scale (the share of
  coefficients whose signs differ: 0 on CPU by construction).

Also records torch.backends.cudnn.allow_tf32 (pyiqa's float32 conv2d on CUDA uses TF32 when
it is on, torch's default). Writes --out (JSON) and prints one line per image.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, write_results

NATIVE_FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"),
                "niqe": ("niqe_modelparameters.mat",), "ilniqe": ("ILNIQE_templateModel.mat",), "piqe": ()}
PYIQA_FILE = {"brisque": "brisque_svm_weights.pth", "niqe": "niqe_modelparameters.mat",
              "ilniqe": "ILNIQE_templateModel.mat"}
TOLERANCE = {"brisque": 1e-2, "niqe": 1e-3, "ilniqe": 1e-3, "piqe": 1e-3}


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--ilniqe", action="store_true", help="also IL-NIQE (slow in pyiqa: BENCHMARKS.md, Metrics)")
    ap.add_argument("--quick", action="store_true", help="the flat-patch images only")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (pyiqa on CPU and the native CPU check)")
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu" / "gpu_flat_check.json")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("no GPU visible: run with --device cpu")
    torch.set_num_threads(max(1, min(args.threads, os.cpu_count() or 1)))
    import pyiqa
    from banana100.testing.flat_images import flat_images, synthetic_images
    from pyiqa.archs.func_util import normalize_img_with_gauss
    from pyiqa.utils.color_util import to_y_channel

    from banana100.metrics import native
    from banana100.metrics.engine.scorer import to_tensor

    images = flat_images() + ([] if args.quick else synthetic_images())
    metrics = ["brisque", "niqe", "piqe"] + (["ilniqe"] if args.ilniqe else [])
    device = torch.device(args.device)
    t0 = time.time()
    results = {"device": str(device), "torch": torch.__version__, "pyiqa": pyiqa.__version__,
               "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
               "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32 if device.type == "cuda" else None,
               "command": "python -m bench.gpu.gpu_flat_check " + " ".join(sys.argv[1:]), "metrics": {}}
    for metric in metrics:
        files = {f: args.params / f for f in NATIVE_FILES[metric]}
        if not all(p.is_file() for p in files.values()):
            results["metrics"][metric] = {"skipped": f"missing files in {args.params}"}
            print(f"{metric}: skipped (files missing in {args.params})", flush=True)
            continue
        kw = {"pretrained_model_path": str(args.params / PYIQA_FILE[metric])} if metric in PYIQA_FILE else {}
        ours = native.build(metric, files, "pyiqa").to(device)
        # native on CPU too: on another machine oneDNN picks other kernels; the repair must follow
        ours_cpu = ours if device.type == "cpu" else native.build(metric, files, "pyiqa")
        theirs = pyiqa.create_metric(metric, device=device, **kw)
        theirs_cpu = theirs if device.type == "cpu" else pyiqa.create_metric(metric, device="cpu", **kw)
        rows = []
        for name, rgb in images:
            x = to_tensor(rgb)[None]
            with torch.no_grad():
                a = float(ours(x.to(device))[0])
                b = float(theirs(x.to(device)).reshape(-1)[0])
                c = float(theirs_cpu(x).reshape(-1)[0])
                d = a if device.type == "cpu" else float(ours_cpu(x)[0])
            row = {"image": name, "native": a, "pyiqa": b, "pyiqa_cpu": c, "native_vs_pyiqa": rel(a, b),
                   "native_cpu": d, "native_vs_pyiqa_on_cpu": rel(d, c),
                   "pyiqa_device_vs_cpu": rel(b, c), "flat_share": float(ours.last_flat_share[0]),
                   "within_card": rel(a, b) < TOLERANCE[metric]}
            if metric == "brisque":
                with torch.no_grad():
                    y = to_y_channel(x.to(device), 255.0)
                    mine = ours.mscn_float32(ours.luminance(x.to(device)).float())
                    ref = normalize_img_with_gauss(y, 7, 7 / 6, padding="same")[:, 0]
                row["mscn_sign_mismatch"] = float((torch.sign(mine) != torch.sign(ref)).double().mean())
            rows.append(row)
            print(f"{metric:8s} {name:34s} native {a:10.4f} pyiqa[{device.type}] {b:10.4f} pyiqa[cpu] {c:10.4f} "
                  f"native-pyiqa {row['native_vs_pyiqa']:.1e}{'' if row['within_card'] else ' OVER CARD'}  "
                  f"pyiqa {device.type}-cpu {row['pyiqa_device_vs_cpu']:.1e}"
                  + (f"  sign mismatch {row['mscn_sign_mismatch']:.2%}" if "mscn_sign_mismatch" in row else ""),
                  flush=True)
        results["metrics"][metric] = {
            "rows": rows, "max_native_vs_pyiqa": max(r["native_vs_pyiqa"] for r in rows),
            "max_pyiqa_device_vs_cpu": max(r["pyiqa_device_vs_cpu"] for r in rows),
            "max_native_vs_pyiqa_on_cpu": max(r["native_vs_pyiqa_on_cpu"] for r in rows),
            "all_within_card": all(r["within_card"] for r in rows)}
    results["seconds"] = round(time.time() - t0)
    write_results(args.out, results)
    print(f"written {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
