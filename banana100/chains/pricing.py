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
def load_pricing() -> dict[str, ModelPrice]:
    ref = resources.files("banana100.generation").joinpath("pricing.yaml")
    try:
        data = yaml.safe_load(ref.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise SettingError(f"{PRICING_FILE}: not valid YAML ({e})") from None
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
