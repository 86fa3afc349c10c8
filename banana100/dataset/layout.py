"""The dataset folder's layout: its files, configs and columns, and which files a chain goes to.

    README.md                                            the card (`CARD_NAME`): YAML configs + dataset_info, prose
    data/<setting>/<model>/train-00000-of-0000N.parquet  the chains of one setting and editor model
    endpoints/train-00000-of-0000M.parquet               steps 0, 1, 5, 10, 20, 100 only (`ENDPOINT_STEPS`)

Configs: `default` (every row), one per setting, one per editor model (`model_config`) and
`endpoints`; one split, `train`. The builder writes this layout and the reader and the checker
read it, so each of its names and rules is written here once.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from banana100.schema import RECORD_FIELDS

SPLIT = "train"
CARD_NAME = "README.md"
DATA_DIR = "data"
ENDPOINTS_DIR = "endpoints"
DEFAULT_CONFIG = "default"
ENDPOINTS_CONFIG = "endpoints"
RESERVED_CONFIGS = (DEFAULT_CONFIG, ENDPOINTS_CONFIG)
MODEL_CONFIG_PREFIX = "model-"
ENDPOINT_STEPS = (0, 1, 5, 10, 20, 100)
#: The Hub's recommended maximum size of one Parquet file (`datasets.config.MAX_SHARD_SIZE`).
SHARD_MAX_BYTES = 500 * 1024**2

IMAGE_COLUMN = "image"
#: Every column but the image, in schema order.
RECORD_COLUMNS = tuple(f.name for f in RECORD_FIELDS if f.name != IMAGE_COLUMN)


def dataset_features():
    """`datasets.Features` of a dataset row, built from `banana100.schema.RECORD_FIELDS`.

    Every field keeps its dtype, in schema order, except `image`: a path in the manifest, the
    embedded image (`datasets.Image()`) in the dataset.
    """
    import datasets

    feats = {}
    for f in RECORD_FIELDS:
        feats[f.name] = datasets.Image() if f.name == IMAGE_COLUMN else datasets.Value(f.dtype)
    return datasets.Features(feats)


def model_slug(model: str) -> str:
    """Folder name for an editor model id: lower case, runs of other characters as `-`."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return slug or "unknown"


def model_config(model: str) -> str:
    """Config name of an editor model: `model-<slug>` (`gemini-3-pro-image-preview` ->
    `model-gemini-3-pro-image-preview`, `FLUX.2 [dev]` -> `model-flux-2-dev`)."""
    return f"{MODEL_CONFIG_PREFIX}{model_slug(model)}"


def chain_models(rows: Iterable[tuple[str, int, str]]) -> dict[str, str]:
    """The editor model of each chain, from its rows' `(chain_id, step, model)`: the model of
    its edited steps (the most frequent one should they differ, then the first by name);
    `source` for a chain that has only its step 0. A chain's step-0 source goes with it."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for chain_id, step, model in rows:
        counts[chain_id]  # every chain has an entry
        if step > 0:
            counts[chain_id][model] += 1
    return {cid: (sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if c else "source")
            for cid, c in counts.items()}
