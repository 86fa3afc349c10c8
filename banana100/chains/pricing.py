"""Cost estimates for paid editors, from `generation/pricing.yaml` (data, one place).

Every number here is an ESTIMATE made from the price list in that file (its `date` and
`source` say where the prices come from); the bill is what the service charges.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from banana100.errors import SettingError

PRICING_FILE = "generation/pricing.yaml"


@dataclass(frozen=True)
class ModelPrice:
    model: str
    input_per_mtok: float
    output_text_per_mtok: float
    output_image_per_mtok: float
    input_image_tokens: int
    output_image_tokens: dict  # image_size -> tokens
    default_image_size: str
    reserve_text_tokens: int
    date: str
    source: str

    def image_tokens(self, image_size: str | None) -> int:
        size = str(image_size or self.default_image_size)
        if size not in self.output_image_tokens:
            return max(self.output_image_tokens.values())
        return int(self.output_image_tokens[size])

    def cost(self, input_tokens: int = 0, output_text_tokens: int = 0, output_image_tokens: int = 0) -> float:
        """USD for the given token counts."""
        return (
            input_tokens * self.input_per_mtok
            + output_text_tokens * self.output_text_per_mtok
            + output_image_tokens * self.output_image_per_mtok
        ) / 1e6

    def typical_call(self, image_size: str | None = None, prompt_tokens: int = 30, thought_tokens: int = 300,
                     images_in: int = 1) -> float:
        """USD of one ordinary edit call: `images_in` images in (1; a same-chat step k sends k:
        the source and the k-1 earlier answers), one image out, a short thought."""
        return self.cost(self.input_image_tokens * images_in + prompt_tokens * images_in, thought_tokens,
                         self.image_tokens(image_size))

    def reserve_call(self, image_size: str | None = None, images_in: int = 1) -> float:
        """USD reserved before a call under a cost cap: a generous bound on one call's cost."""
        return self.cost(self.input_image_tokens * images_in + 200 * images_in, self.reserve_text_tokens,
                         self.image_tokens(image_size))

    def from_usage(
        self,
        prompt_tokens: int | None,
        candidates_tokens: int | None,
        thought_tokens: int | None,
        image_out_tokens: int | None,
        images_out: int,
        image_size: str | None,
    ) -> float:
        """USD of one answered call from its usage metadata.

        `image_out_tokens` is the IMAGE modality count of the output when the service reports
        it; otherwise each returned image is counted at the price list's tokens for its size
        and the rest of the output tokens as text. Thinking is billed as text output. Without
        any usage data the call is counted as `typical_call` (or its input only, when no image
        came back).
        """
        if prompt_tokens is None and candidates_tokens is None:
            if images_out:
                return self.typical_call(image_size)
            return self.cost(self.input_image_tokens + 30, 0, 0)
        cand = int(candidates_tokens or 0)
        if image_out_tokens is None:
            image_out_tokens = min(cand, images_out * self.image_tokens(image_size)) if images_out else 0
        text_out = max(cand - int(image_out_tokens), 0) + int(thought_tokens or 0)
        return self.cost(int(prompt_tokens or 0), text_out, int(image_out_tokens))


@lru_cache(maxsize=None)
def _pricing_data() -> dict:
    """pricing.yaml as read (both price lists' one source), or a SettingError naming the file."""
    ref = resources.files("banana100.generation").joinpath("pricing.yaml")
    try:
        return yaml.safe_load(ref.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise SettingError(f"{PRICING_FILE}: not valid YAML ({e})") from None


@lru_cache(maxsize=None)
def load_pricing() -> dict[str, ModelPrice]:
    data = _pricing_data()
    out = {}
    for model, raw in (data.get("models") or {}).items():
        try:
            out[model] = ModelPrice(
                model=model,
                input_per_mtok=float(raw["input_per_mtok"]),
                output_text_per_mtok=float(raw["output_text_per_mtok"]),
                output_image_per_mtok=float(raw["output_image_per_mtok"]),
                input_image_tokens=int(raw["input_image_tokens"]),
                output_image_tokens={str(k): int(v) for k, v in raw["output_image_tokens"].items()},
                default_image_size=str(raw.get("default_image_size", "1K")),
                reserve_text_tokens=int(raw.get("reserve_text_tokens", 2000)),
                date=str(data.get("date", "")),
                source=str(data.get("source", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SettingError(f"{PRICING_FILE}: model {model!r} is malformed ({e!r})") from None
    return out


def price_for(model: str) -> ModelPrice | None:
    """The price list entry of `model`, or None when the file does not know it."""
    return load_pricing().get(model)


@dataclass(frozen=True)
class ImagePrice:
    """The price list entry of an editor billed per image (`image_models` in pricing.yaml)."""

    model: str
    provider: str
    date: str
    source: str
    list_price: bool
    output_usd: object = 0.0  # a number, or {quality: {size: USD}}
    input_image_usd: float = 0.0
    first_mp_usd: float | None = None  # per-megapixel pricing (BFL)
    extra_mp_usd: float | None = None
    tokens: dict | None = None  # USD per million tokens: text_in, image_in, image_out

    def image_usd(self, quality: str | None = None, size: str | None = None) -> float:
        """One output image; an unknown quality or size is counted at the dearest one (a bound)."""
        table = self.output_usd
        if not isinstance(table, dict):
            return float(table)
        by_size = table.get(quality) if quality in table else max(table.values(), key=lambda t: max(t.values()))
        return float(by_size.get(size, max(by_size.values())))

    def call_usd(self, quality: str | None = None, size: str | None = None, images_in: int = 1) -> float:
        """One call: an output image, `images_in` images sent along."""
        return self.image_usd(quality, size) + self.input_image_usd * int(images_in)

    def megapixel_usd(self, out_mp: float, in_mps=()) -> float:
        """Per-megapixel pricing: the output's first megapixel, then each further one, in and out
        (each image rounded up to whole megapixels)."""
        import math

        extra = max(math.ceil(out_mp - 1e-9), 1) - 1 + sum(max(math.ceil(mp - 1e-9), 1) for mp in in_mps)
        return float(self.first_mp_usd) + float(self.extra_mp_usd) * extra

    def usage_usd(self, text_in: int, image_in: int, image_out: int) -> float | None:
        """USD from the token counts an answer reports; None without token prices."""
        if not self.tokens:
            return None
        t = self.tokens
        return (text_in * t.get("text_in", 0) + image_in * t.get("image_in", 0) + image_out * t.get("image_out", 0)) / 1e6


@lru_cache(maxsize=None)
def load_image_pricing() -> dict[str, ImagePrice]:
    data = _pricing_data()
    out = {}
    for model, raw in (data.get("image_models") or {}).items():
        try:
            mp = raw.get("first_mp_usd") is not None
            out[model] = ImagePrice(
                model=model, provider=str(raw["provider"]), date=str(raw["date"]), source=str(raw["source"]),
                list_price=bool(raw.get("list_price", False)),
                output_usd=raw["output_usd"] if not mp else 0.0,
                input_image_usd=float(raw.get("input_image_usd", 0.0)),
                first_mp_usd=float(raw["first_mp_usd"]) if mp else None,
                extra_mp_usd=float(raw["extra_mp_usd"]) if mp else None,
                tokens={k: float(v) for k, v in raw["tokens"].items()} if raw.get("tokens") else None,
            )
            out[model].image_usd()  # a malformed table fails here, not mid-run
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SettingError(f"{PRICING_FILE}: image model {model!r} is malformed ({e!r})") from None
    return out


def image_price_for(model: str) -> ImagePrice | None:
    """The per-image price list entry of `model`, or None when the file does not know it."""
    return load_image_pricing().get(model)
