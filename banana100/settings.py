"""Generation settings, read from `generation/settings.yaml` (data, not code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml

from .errors import SettingError

TRANSFORMS = ("none", "hflip", "rotate90")


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


def _parse(name: str, raw: dict, origin: str) -> Setting:
    if not isinstance(raw, dict):
        raise SettingError(f"{origin}: setting {name!r} must be a mapping")
    prompts = raw.get("prompts")
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise SettingError(f"{origin}: setting {name!r} needs a non-empty list of prompts")
    simulate = dict(raw.get("simulate") or {})
    if simulate.get("transform", "none") not in TRANSFORMS:
        raise SettingError(f"{origin}: setting {name!r}: simulate.transform must be one of {TRANSFORMS}")
    return Setting(name, str(raw.get("description", "")), tuple(prompts), dict(raw.get("config") or {}), simulate)


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
