"""Generation settings, read from `generation/settings.yaml` (data, not code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml

from banana100.errors import SettingError

TRANSFORMS = ("none", "hflip", "rotate90", "desaturate", "recolor")
SEED_POLICIES = ("per_step", "fixed")


@dataclass(frozen=True)
class Setting:
    name: str
    description: str
    prompts: tuple[str, ...]
    config: dict = field(default_factory=dict)
    simulate: dict = field(default_factory=dict)

    def prompt(self, step: int) -> str:
        """The instruction for output step `step` (1-based)."""
        if step < 1:
            raise ValueError("step 0 is the source image; it has no prompt")
        return self.prompts[(step - 1) % len(self.prompts)]

    def simulate_for(self, step: int) -> dict:
        """The simulated editor's hints for output step `step`: `transforms` is cycled like the prompts."""
        hints = dict(self.simulate)
        cycle = hints.pop("transforms", None)
        if cycle:
            hints["transform"] = cycle[(step - 1) % len(cycle)]
        return hints

    @property
    def seed_policy(self) -> str:
        """`per_step` (a new seed for every step) or `fixed` (one seed per chain)."""
        return str(self.config.get("seed_policy", "per_step"))


def _parse(name: str, raw: dict, origin: str) -> Setting:
    if not isinstance(raw, dict):
        raise SettingError(f"{origin}: setting {name!r} must be a mapping")
    prompts = raw.get("prompts")
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise SettingError(f"{origin}: setting {name!r} needs a non-empty list of prompts")
    simulate = dict(raw.get("simulate") or {})
    transforms = simulate.get("transforms") or []
    if not isinstance(transforms, list):
        raise SettingError(f"{origin}: setting {name!r}: simulate.transforms must be a list")
    for t in [simulate.get("transform", "none"), *transforms]:
        if t not in TRANSFORMS:
            raise SettingError(f"{origin}: setting {name!r}: simulate transform {t!r} is not one of {TRANSFORMS}")
    config = dict(raw.get("config") or {})
    if config.get("seed_policy", "per_step") not in SEED_POLICIES:
        raise SettingError(f"{origin}: setting {name!r}: config.seed_policy must be one of {SEED_POLICIES}")
    return Setting(name, str(raw.get("description", "")), tuple(prompts), config, simulate)


@lru_cache(maxsize=None)
def load_settings() -> dict[str, Setting]:
    ref = resources.files("banana100.generation").joinpath("settings.yaml")
    origin = "generation/settings.yaml"
    try:
        data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise SettingError(f"{origin}: not valid YAML ({e})") from None
    return {name: _parse(name, raw, origin) for name, raw in data.items()}


def get_setting(name: str) -> Setting:
    settings = load_settings()
    if name not in settings:
        raise SettingError(f"unknown setting {name!r}; known: {', '.join(settings)}")
    return settings[name]
