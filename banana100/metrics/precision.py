"""Float32 precision of a forward pass: "exact" (IEEE float32 everywhere, the default) or "fast".

torch lets cuDNN convolutions use TF32 by default (`torch.backends.cudnn.allow_tf32`), and
users often turn it on for matrix products too; on an Ampere-or-later GPU that moved native
BRISQUE up to 8 % from its CPU score (issue 30). `float32_precision` sets those flags for one
forward pass and restores them afterwards (also when the pass raises), through the
`fp32_precision` API of torch 2.9+ where it exists (reading the old `allow_tf32` flags raises
there once the two APIs were mixed) and the old flags before it.

"fast" allows TF32 (and, for the deep metrics on a GPU, bfloat16 autocast: `autocast_dtype`);
its error against "exact" is measured per metric by bench/gpu/gpu_precision_check.py and stated on
each card (banana100/metrics/precision_fast.json).
"""

from __future__ import annotations

import contextlib
import json
import threading
from importlib import resources

import torch

from banana100.errors import UsageError

PRECISIONS = ("exact", "fast")
# The flags are process-wide: a forward in another thread must not restore them under this one.
# Re-entrant: the engine's guard holds it around the native forward's own.
_FLAGS_LOCK = threading.RLock()


def check_precision(precision: str) -> str:
    """`precision` if it is one of PRECISIONS, else UsageError naming the choices."""
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def flag_leaves() -> list[tuple[object, bool]]:
    """The fp32_precision settings (torch 2.9+) of convolutions, matrix products and RNNs:
    (settings object, whether it is a GPU one); [] on an older torch."""
    b = torch.backends
    mkldnn = getattr(b, "mkldnn", None)
    found = []
    for parent, names, gpu in ((b.cudnn, ("conv", "rnn"), True), (b.cuda, ("matmul",), True),
                               (mkldnn, ("conv", "matmul", "rnn"), False)):
        for name in names:
            owner = getattr(parent, name, None)
            if owner is not None and hasattr(owner, "fp32_precision"):
                found.append((owner, gpu))
    return found


def _legacy_state() -> dict:
    """The flags of the old API that can be read: reading `cudnn.allow_tf32` raises on torch 2.9+
    once a user mixed the two APIs (the leaves of `flag_leaves` then hold the state)."""
    state = {}
    for key, get in (("cudnn", lambda: torch.backends.cudnn.allow_tf32),
                     ("matmul", torch.get_float32_matmul_precision)):
        try:
            state[key] = get()
        except RuntimeError:
            pass
    return state


def _set_legacy(state: dict) -> None:
    if "cudnn" in state:
        torch.backends.cudnn.allow_tf32 = state["cudnn"]
    if "matmul" in state:
        torch.set_float32_matmul_precision(state["matmul"])


@contextlib.contextmanager
def float32_precision(allow_tf32: bool = False):
    """Inside: TF32 allowed in the GPU's convolutions and matrix products iff `allow_tf32`
    (exact: oneDNN's float32 on CPU held at IEEE too); afterwards every flag as it was.

    Both APIs are set so that they agree inside (torch 2.9+ checks that they do before a cuBLAS
    matmul), and restored old API first, then the leaves, which the old setters overwrite.
    Guarded passes in several threads run one at a time (the flags are global).
    """
    with _FLAGS_LOCK, _set_flags(allow_tf32):
        yield


@contextlib.contextmanager
def _set_flags(allow_tf32: bool):
    legacy, leaves = _legacy_state(), flag_leaves()
    saved = [(o, o.fp32_precision) for o, _ in leaves]
    try:
        inside = {"cudnn": allow_tf32, "matmul": "high" if allow_tf32 else "highest"}
        _set_legacy({k: v for k, v in inside.items() if k in legacy})  # one that cannot be read stays
        for o, gpu in leaves:
            if gpu:
                o.fp32_precision = "tf32" if allow_tf32 else "ieee"
            elif not allow_tf32:
                o.fp32_precision = "ieee"
        yield
    finally:
        _set_legacy(legacy)
        for o, value in saved:
            o.fp32_precision = value


def tf32_in_effect() -> dict[str, bool]:
    """Whether the GPU's convolutions and matrix products may use TF32 now (what tests spy on)."""
    b = torch.backends
    if flag_leaves():
        def effective(owner, parent) -> bool:
            for value in (owner.fp32_precision, getattr(parent, "fp32_precision", "none"),
                          getattr(b, "fp32_precision", "none")):
                if value != "none":
                    return value == "tf32"
            return False

        return {"conv": effective(b.cudnn.conv, b.cudnn), "matmul": effective(b.cuda.matmul, b.cuda)}
    return {"conv": bool(b.cudnn.allow_tf32),
            "matmul": bool(b.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"}


def autocast_dtype(precision: str, device: torch.device, half: bool = False) -> torch.dtype | None:
    """The autocast dtype of a deep metric's forward: float16 when `half` (validated per metric),
    bfloat16 in "fast" mode on a GPU, else None (float32)."""
    if half:
        return torch.float16
    if precision == "fast" and device.type == "cuda":
        return torch.bfloat16
    return None


def fast_errors() -> dict:
    """The measured error of "fast" against "exact" per metric (precision_fast.json, written from
    bench/gpu/gpu_precision_check.py's output on a GPU); {} until measured."""
    try:
        text = resources.files("banana100.metrics").joinpath("precision_fast.json").read_text()
    except FileNotFoundError:
        return {}
    return json.loads(text).get("metrics", {})
