"""A local stand-in of the original Banana100 release, laid out as its Hub dataset repository.

The real repository (`kenantang/Banana100`) could not be reached when this was written; the
layout is the one `banana100.explore.ORIGINAL_RELEASE` assumes (one PNG per step under
`{setting}/{source}/rep{repeat}/img_{step:03d}.png`, step 0 = the source, a dataset card at the
root, the usual `.gitattributes`). Its chains are simulated-editor chains of generated sources,
so that the Space's whole release path (listing, per-chain download, import, on-demand scoring)
can run offline on files of the right shape.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

CARD = """---
license: cc-by-nc-sa-4.0
pretty_name: Banana100 (local stand-in)
task_categories:
- image-to-image
---

# Banana100 stand-in

Simulated chains in the layout the toolkit assumes for the original release; not Nano Banana output.
"""


def make_release_standin(root: Path, sources=("dunes", "moss"), repeats: int = 2, steps: int = 20,
                         side: int = 128, scores: Path | None = None) -> Path:
    """Write the stand-in into `root` (kept when already complete); returns `root`."""
    from banana100.synth import generated_source
    from banana100.chains.editors import make_editor

    done = root / ".complete"
    if done.is_file():
        return root
    editor = make_editor("simulated")
    for source in sources:
        for rep in range(repeats):
            folder = root / "replicate" / source / f"rep{rep}"
            folder.mkdir(parents=True, exist_ok=True)
            img = generated_source(source, side)
            for k in range(steps + 1):
                if k:
                    img = editor.apply(img, seed=1000 * rep + k)
                Image.fromarray(np.ascontiguousarray(img)).save(folder / f"img_{k:03d}.png")
    (root / "README.md").write_text(CARD)
    (root / ".gitattributes").write_text("*.png filter=lfs diff=lfs merge=lfs -text\n")
    if scores is not None:
        (root / "scores.parquet").write_bytes(Path(scores).read_bytes())
    done.write_text("ok\n")
    return root
