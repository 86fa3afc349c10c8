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


#: The supplement stand-in's sequences: (variant, chat folder). Seven editor families in
#: "different chat", four of them also in "same chat": 11 sequences of one source, as the
#: release's `more_models` supplement is described (its real folder names are not known here).
SUPPLEMENT_SEQUENCES = tuple(
    [(v, "different_chat") for v in ("flux2_dev", "flux2_klein", "qwen_edit", "kontext", "seedream", "gpt_image",
                                     "nano_banana2")]
    + [(v, "same_chat") for v in ("flux2_klein", "qwen_edit", "gpt_image", "nano_banana2")])
SUPPLEMENT_PATTERN = "more_models/{variant}/{chat}/{source}/img_{step:03d}.png"
# Output sizes an editor may return (width, height), none of them the source's 136x120.
_SUPPLEMENT_SIZES = ((96, 96), (112, 104), (128, 96), (120, 120), (104, 128))


def make_supplement_standin(root: Path, source: str = "dunes", steps: int = 10) -> Path:
    """Write a stand-in shaped like the `more_models` supplement into `root` (kept when complete):
    one source, the 11 `SUPPLEMENT_SEQUENCES` of `steps` steps under `SUPPLEMENT_PATTERN`, every
    output a different size from its input. Simulated-editor images, not real editor output."""
    from banana100.synth import generated_source
    from banana100.chains.editors import make_editor

    done = root / ".complete"
    if done.is_file():
        return root
    editor = make_editor("simulated")
    src = Image.fromarray(np.ascontiguousarray(generated_source(source, 128))).resize((136, 120), Image.BICUBIC)
    for n, (variant, chat) in enumerate(SUPPLEMENT_SEQUENCES):
        folder = root / "more_models" / variant / chat / source
        folder.mkdir(parents=True, exist_ok=True)
        img = src
        img.save(folder / "img_000.png")
        for k in range(1, steps + 1):
            out = editor.apply(np.asarray(img), seed=100 * n + k)
            img = Image.fromarray(np.ascontiguousarray(out)).resize(_SUPPLEMENT_SIZES[(n + k) % 5], Image.BICUBIC)
            img.save(folder / f"img_{k:03d}.png")
    (root / "README.md").write_text(CARD)
    done.write_text("ok\n")
    return root
