"""Small test data: source images and valid run folders, made without running an editor."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from PIL import Image

from banana100.imageio import encode_png
from banana100.chains.manifest import ManifestWriter, sha256_bytes, utc_now
from banana100.schema import chain_id as make_chain_id


def make_run_folder(run_dir: Path, sources=("a", "b"), setting="replicate", steps=20, size=(32, 32), seed=0) -> list[dict]:
    """Chains of random-noise-on-gradient PNGs with a valid manifest; returns the records."""
    rng = np.random.default_rng(seed)
    h, w = size
    records = []
    with ManifestWriter(run_dir) as writer:
        for source_id in sources:
            cid = make_chain_id(source_id, setting, 0)
            base = np.linspace(0, 200, w)[None, :, None].repeat(h, 0).repeat(3, 2)
            parent = None
            for step in range(steps + 1):
                noise = rng.normal(0, 2 + step, size=(h, w, 3))
                data = encode_png(np.clip(base + noise, 0, 255).astype(np.uint8))
                rel = f"{cid}/step_{step:03d}.png"
                (run_dir / cid).mkdir(parents=True, exist_ok=True)
                (run_dir / rel).write_bytes(data)
                sha = sha256_bytes(data)
                record = {
                    "chain_id": cid, "source_id": source_id, "setting": setting, "repeat": 0, "step": step,
                    "image": rel, "sha256": sha, "parent_sha256": parent,
                    "prompt": None if step == 0 else "Produce an exact replica of the provided image, with no alterations.",
                    "editor": "simulated", "model": "simulated-v1", "seed": None if step == 0 else step,
                    "width": w, "height": h, "created_at": utc_now(),
                }
                writer.append(record)
                records.append(record)
                parent = sha
    return records


def write_source(path: Path, h=48, w=64, seed=0) -> np.ndarray:
    """An asymmetric image (bright left, dark right) with some texture; returns its pixels."""
    rng = np.random.default_rng(seed)
    xx = np.linspace(230, 30, w)[None, :, None]
    img = np.clip(xx + rng.normal(0, 8, (h, w, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(path)
    return img
