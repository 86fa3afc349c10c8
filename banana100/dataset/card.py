"""The dataset card (`README.md`): YAML (licence, sources, configs, dataset_info) and prose,
written from `card_template.md`.

    facts = provenance(records, source_licences={"moss": "CC0-1.0"})
    write_card(folder, records, stats, dataset_features(), provenance_facts=facts)

The card states where the images come from and under which licence (`provenance`), one YAML
config per `configs` entry (`layout`), and each config's rows and sizes (`ConfigStats`).
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from banana100 import about
from banana100.extras import requirement
from banana100.dataset.layout import (
    CARD_NAME,
    DATA_DIR,
    DEFAULT_CONFIG,
    ENDPOINT_STEPS,
    ENDPOINTS_CONFIG,
    ENDPOINTS_DIR,
    IMAGE_COLUMN,
    RESERVED_CONFIGS,
    SHARD_MAX_BYTES,
    SPLIT,
    model_slug,
)
from banana100.dataset.shards import ROW_GROUP_ROWS
from banana100.errors import DatasetError
from banana100.schema import DEFAULT_CHAT_MODE, RECORD_FIELDS, chat_mode_of
from banana100.fileio import write_file_atomic

CARD_TEMPLATE = "card_template.md"
#: The Hub id in the card's loading lines until the folder is pushed (`banana100 push` writes the
#: real one into the `REPO = "..."` line; `build-dataset --repo-id` sets it at build time).
REPO_PLACEHOLDER = "ORG/NAME"
_REPO_LINE = re.compile(r'^REPO = "[^"\n]*"', re.MULTILINE)
#: Under the loading lines while the Hub id is not known (`with_repo_id` removes it).
_REPO_NOTE = (f"(`{REPO_PLACEHOLDER}` stands for the Hub id: `banana100 push --repo-id ORG/NAME` writes it "
              "into this line.)")


@dataclass
class ConfigStats:
    """The sizes of one config, as the card's `dataset_info` states them."""

    num_rows: int = 0
    num_bytes: int = 0  # Arrow bytes (dataset_size)
    download_size: int = 0  # Parquet file bytes
    files: int = 0



def size_category(n: int) -> str:
    """The Hub's `size_categories` tag of a dataset of `n` rows: "n<1K" below 1,000, "1K<n<10K" from 1,000 on, ..."""
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if n < limit:
            return name
    return "10M<n<100M"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            if unit == "B":
                return f"{n} B"
            return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _editor_rows(records: list[dict]) -> tuple[list[dict], list[dict], int]:
    """Who made the rows: per (editor, model) the edited rows and chains, the sources' makers, and the
    number of rows the simulated editor made."""
    made_by = Counter((r["editor"], r["model"]) for r in records if r["step"] > 0)
    sources = Counter((r["editor"], r["model"]) for r in records if r["step"] == 0)
    chains_by_editor: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r["step"] > 0:
            chains_by_editor[(r["editor"], r["model"])].add(r["chain_id"])
    editors = [
        {"editor": e, "model": m, "rows": n, "chains": len(chains_by_editor[(e, m)])}
        for (e, m), n in sorted(made_by.items(), key=lambda kv: -kv[1])
    ]
    source_editors = [{"editor": e, "model": m, "rows": n} for (e, m), n in sorted(sources.items())]
    return editors, source_editors, sum(n for (e, _), n in made_by.items() if e == "simulated")


def _setting_rows(records: list[dict]) -> list[dict]:
    """One entry per setting in the data, described from the toolkit's settings file where it is there."""
    from banana100.chains.settings import load_settings
    from banana100.errors import SettingError

    try:
        known = load_settings()
    except SettingError:
        known = {}
    settings = []
    for name in sorted({r["setting"] for r in records}):
        rows = [r for r in records if r["setting"] == name]
        data_prompts = list(dict.fromkeys(r["prompt"] for r in rows if r.get("prompt")))
        s = known.get(name)
        listed = list(s.prompts) if s else []
        settings.append(
            {
                "name": name,
                "description": s.description if s else "(not in this toolkit's generation/settings.yaml)",
                "prompts": listed or data_prompts,
                "other_prompts": [p for p in data_prompts if p not in listed] if listed else [],
                "chains": len({r["chain_id"] for r in rows}),
                "sources": len({r["source_id"] for r in rows}),
                "rows": len(rows),
                "max_step": max(r["step"] for r in rows),
            }
        )
    return settings


def _config_rows(stats: dict[str, ConfigStats], config_files: dict[str, str],
                 model_configs: dict[str, str]) -> list[dict]:
    model_of_config = {c: m for m, c in model_configs.items()}
    configs = []
    for name, st in stats.items():
        if name == DEFAULT_CONFIG:
            what = "every image of every chain"
        elif name == ENDPOINTS_CONFIG:
            what = f"steps {', '.join(map(str, ENDPOINT_STEPS))} only"
        elif name in model_of_config:
            what = f"the chains edited by `{model_of_config[name]}` (with their step-0 sources)"
        else:
            what = f"the `{name}` setting"
        configs.append(
            {"name": name, "what": what, "where": f"`{config_files[name]}`", "rows": st.num_rows, "files": st.files,
             "size": human_bytes(st.download_size)}
        )
    return configs


def _field_rows() -> list[dict]:
    fields = []
    for f in RECORD_FIELDS:
        if f.name == IMAGE_COLUMN:
            fields.append(
                {"name": f.name, "dtype": "Image",
                 "doc": "The image, its original file bytes untouched (decoded to PIL by `datasets`); "
                        "`path` is its file path in the run folder, `<chain_id>/step_NNN.png`."}
            )
        else:
            fields.append({"name": f.name, "dtype": f.dtype, "doc": f.doc})
    return fields


def _chat_variant_rows(records: list[dict]) -> tuple[list[dict], int]:
    """Chat modes and variants (the release's supplement), shown only when some chain has one, and the
    number of chains whose images change size along the chain."""
    kinds: dict[tuple, set] = defaultdict(set)
    kind_rows: Counter = Counter()
    sizes: dict[str, set] = defaultdict(set)
    for r in records:
        kind = (chat_mode_of(r), r.get("variant") or "")
        kinds[kind].add(r["chain_id"])
        kind_rows[kind] += 1
        sizes[r["chain_id"]].add((r["width"], r["height"]))
    chat_variants = [{"chat_mode": c, "variant": v, "chains": len(kinds[(c, v)]), "rows": kind_rows[(c, v)]}
                     for c, v in sorted(kinds)] if set(kinds) != {(DEFAULT_CHAT_MODE, "")} else []
    return chat_variants, sum(len(v) > 1 for v in sizes.values())


def _card_context(records: list[dict], stats: dict[str, ConfigStats], shard_max_bytes: int,
                  config_files: dict[str, str], model_configs: dict[str, str]) -> dict:
    chains = defaultdict(list)
    for r in records:
        chains[r["chain_id"]].append(r["step"])
    editors, source_editors, simulated_rows = _editor_rows(records)
    n_edited = sum(e["rows"] for e in editors)
    settings = _setting_rows(records)
    chat_variants, resized_chains = _chat_variant_rows(records)
    return {
        "n_rows": len(records),
        "n_step0": sum(r["step"] == 0 for r in records),
        "n_edited": n_edited,
        "n_chains": len(chains),
        "n_sources": len({r["source_id"] for r in records}),
        "max_steps": sorted({max(v) for v in chains.values()}),
        "editors": editors,
        "source_editors": source_editors,
        "simulated": simulated_rows > 0,
        "simulated_rows": simulated_rows,
        "all_simulated": simulated_rows > 0 and simulated_rows == n_edited,
        "settings": settings,
        "chat_variants": chat_variants,
        "resized_chains": resized_chains,
        "configs": _config_rows(stats, config_files, model_configs),
        "fields": _field_rows(),
        "endpoint_steps": list(ENDPOINT_STEPS),
        "endpoint_steps_present": sorted({r["step"] for r in records} & set(ENDPOINT_STEPS)),
        "example_setting": settings[0]["name"],
        "shard_max": human_bytes(shard_max_bytes),
        "row_group_rows": ROW_GROUP_ROWS,
        "citation": about.CITATION,
    }


# Licences the Hub knows by id (https://huggingface.co/docs/hub/repositories-licenses) that a
# builder is likely to give; anything else is stated in the card under `license: other`.
HUB_LICENCE_IDS = frozenset({
    "apache-2.0", "mit", "bsd-3-clause", "unlicense", "cc0-1.0", "pddl", "odc-by", "odbl", "cc-by-2.0",
    "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0",
    "cc-by-nd-4.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "other",
})
# Hub datasets whose licence this toolkit knows: images imported from them keep it.
KNOWN_DATASET_LICENCES = {about.ORIGINAL_DATASET: about.DATA_LICENCE}
_GEMINI_TERMS = "https://ai.google.dev/gemini-api/terms"


def _hub_licence_id(text: str) -> str | None:
    """`text` as a Hub licence id when it is one (`CC0-1.0` -> `cc0-1.0`), else None."""
    key = str(text).strip().lower().replace(" ", "-")
    return key if key in HUB_LICENCE_IDS else None


def read_source_licences(source: str | os.PathLike | dict | None) -> dict[str, str]:
    """{source_id: licence} from a dict or a YAML/JSON file (`coffee: CC0-1.0`, one line a source)."""
    if source is None:
        return {}
    if isinstance(source, dict):
        data = source
    else:
        import yaml

        path = Path(source)
        if not path.is_file():
            raise DatasetError(f"{path}: no such source-licences file (YAML: one `source_id: licence` per line)")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise DatasetError(f"{path}: not valid YAML ({e})") from None
        if not isinstance(data, dict):
            raise DatasetError(f"{path}: expected a mapping `source_id: licence`, got {type(data).__name__}")
    return {str(k): str(v).strip() for k, v in data.items() if str(v).strip()}


def provenance(records: list[dict], licence: str | None = None, source_licences: dict[str, str] | None = None,
               source_datasets: list[str] | None = None) -> dict:
    """What the card says about where the images come from and under which licence.

    - Chains imported from a Hub release (`source_datasets`, e.g. kenantang/Banana100): the
      release's licence (CC BY-NC-SA 4.0 for the original Banana100).
    - Chains made here (simulated or gemini editor) from the builder's own source images: each
      image keeps its source image's licence (`source_licences`); the simulated editor adds no
      rights of its own. One Hub id when every source has the same one, else `other` with a table.
    - `licence` given by the builder overrides the Hub id (the prose still lists the sources).
    """
    source_licences = dict(source_licences or {})
    source_datasets = list(dict.fromkeys(source_datasets or []))
    sources = sorted({r["source_id"] for r in records})
    editors = {r["editor"] for r in records if r["step"] > 0}
    imported = "imported" in editors
    unknown_sources = [s for s in sources if s not in source_licences]
    notes = []
    known = [d for d in source_datasets if d in KNOWN_DATASET_LICENCES]
    if known:
        hub_id = KNOWN_DATASET_LICENCES[known[0]]
        why = (f"inherited from {', '.join(f'[{d}](https://huggingface.co/datasets/{d})' for d in known)}, "
               "the release these chains were imported from")
        if len({KNOWN_DATASET_LICENCES[d] for d in known}) > 1:
            hub_id, why = "other", "the releases these chains come from have different licences (see below)"
    elif source_datasets:
        hub_id, why = "other", (f"the licence of {', '.join(source_datasets)}, the release these chains come from "
                                "(not known to this toolkit: check it and rebuild with `--licence`)")
    elif sources and not unknown_sources:
        ids = {_hub_licence_id(source_licences[s]) for s in sources}
        texts = {source_licences[s] for s in sources}
        hub_id = ids.pop() if len(ids) == 1 and None not in ids else "other"
        why = ("the licence of every source image" if len(texts) == 1 else
               "each image keeps the licence of its chain's source image (table below)")
    else:
        hub_id = "other"
        why = (f"not recorded for {len(unknown_sources)} of the {len(sources)} source images "
               f"({', '.join(unknown_sources[:5])}{', ...' if len(unknown_sources) > 5 else ''}): each image keeps "
               "its source image's licence; rebuild with `--source-licences FILE` (or `--licence ID`) before "
               "publishing")
    if licence:
        hub_id = _hub_licence_id(licence) or "other"
        notes.append(f"The builder set the licence to **{licence}** (`--licence`).")
    if "simulated" in editors:
        notes.append("The `simulated` editor is code of this toolkit (Apache-2.0): its outputs are derived from "
                     "the source images and keep their licences; it adds no terms of its own.")
    if "gemini" in editors:
        notes.append(f"Images made by the `gemini` editor were generated with Google's Gemini API: its terms "
                     f"({_GEMINI_TERMS}) apply to their use, besides the source images' licences.")
    if imported and not source_datasets:
        notes.append("Some chains were imported (`banana100 import-chains`) without naming the release they come "
                     "from: rebuild with `--source-dataset HUB_ID` so that the card can state its licence.")
    return {
        "license": hub_id,
        "licence_why": why,
        "licence_notes": notes,
        "licence_given": licence,
        "source_datasets": source_datasets,
        "source_rows": [{"source_id": s, "licence": source_licences.get(s, "not recorded")} for s in sources],
        "licence_unknown": hub_id == "other" and not licence and (bool(unknown_sources) and not known),
    }


def write_card(folder: Path, records: list[dict], stats: dict[str, ConfigStats], features,
               shard_max_bytes: int = SHARD_MAX_BYTES, model_configs: dict[str, str] | None = None,
               provenance_facts: dict | None = None, repo_id: str | None = None) -> Path:
    """Write `folder/README.md`: YAML (licence, sources, configs, dataset_info, ...) and prose.

    `model_configs` maps each editor model id to its config name (`model_config`);
    `provenance_facts` is `provenance(...)` (default: nothing known about the sources);
    `repo_id` is the Hub id the card's loading lines use (`banana100 push` sets it on upload).
    """
    import datasets
    from huggingface_hub import DatasetCard, DatasetCardData

    model_configs = dict(model_configs or {})
    model_names = sorted(model_configs.values())
    settings = sorted(c for c in stats if c not in RESERVED_CONFIGS and c not in model_names)
    config_files = {DEFAULT_CONFIG: f"{DATA_DIR}/*/*/*.parquet", ENDPOINTS_CONFIG: f"{ENDPOINTS_DIR}/*.parquet"}
    config_files.update({s: f"{DATA_DIR}/{s}/*/*.parquet" for s in settings})
    config_files.update({c: f"{DATA_DIR}/*/{model_slug(m)}/*.parquet" for m, c in model_configs.items()})
    order = [DEFAULT_CONFIG, *settings, *[c for c in model_names if c in stats],
             *([ENDPOINTS_CONFIG] if ENDPOINTS_CONFIG in stats else [])]
    yaml_configs = [
        {"config_name": name, "data_files": [{"split": SPLIT, "path": config_files[name]}]}
        | ({"default": True} if name == DEFAULT_CONFIG else {})
        for name in order
    ]
    n_rows = stats[DEFAULT_CONFIG].num_rows
    context = _card_context(records, {name: stats[name] for name in order}, shard_max_bytes, config_files,
                            model_configs)
    facts = provenance_facts or provenance(records)
    context.update(facts, repo_id=repo_id or REPO_PLACEHOLDER, repo_known=bool(repo_id), repo_note=_REPO_NOTE,
                   original_dataset=about.ORIGINAL_DATASET, toolkit_requirement=requirement())
    pretty_name = "Banana100 chains"
    if context["all_simulated"]:
        pretty_name += " (simulated editor)"
    elif context["simulated"]:
        pretty_name += " (partly simulated editor)"
    card_data = DatasetCardData(
        license=facts["license"],
        pretty_name=pretty_name,
        # every field but the image is written by the toolkit (manifest records), none by people
        annotations_creators=["machine-generated"],
        source_datasets=facts["source_datasets"] or ["original"],
        task_categories=["image-to-image"],
        tags=["image-quality-assessment", "no-reference-iqa", "nr-iqa", "iterative-editing", "image-editing",
              "degradation", "synthetic", "banana100"],
        size_categories=[size_category(n_rows)],
        configs=yaml_configs,
    )
    from datasets.info import DatasetInfosDict

    infos = DatasetInfosDict()
    for name in order:
        st = stats[name]
        splits = datasets.SplitDict()
        splits.add(datasets.SplitInfo(name=SPLIT, num_bytes=st.num_bytes, num_examples=st.num_rows))
        infos[name] = datasets.DatasetInfo(
            features=features.copy(), splits=splits, download_size=st.download_size,
            dataset_size=st.num_bytes, config_name=name,
        )
    infos.to_dataset_card_data(card_data)

    template = resources.files("banana100.dataset").joinpath(CARD_TEMPLATE).read_text(encoding="utf-8")
    card = DatasetCard.from_template(card_data, template_str=template, **context)
    text = re.sub(r"\n{3,}", "\n\n", str(card)).rstrip("\n") + "\n"
    path = folder / CARD_NAME
    write_file_atomic(path, text.encode("utf-8"))
    return path


def with_repo_id(card_text: str, repo_id: str) -> str:
    """The card's text with its loading lines (`REPO = "..."`) naming the Hub dataset `repo_id`."""
    text = _REPO_LINE.sub(f'REPO = "{repo_id}"', card_text, count=1)
    return text.replace(f"\n{_REPO_NOTE}\n", "\n")
