"""What a model call costs, in CHF, from a per-model price table.

Prices are CHF per one million tokens, input (prompt) and output (completion) apart. The
built-in table covers common OpenAI models; a provider of POWERON_AI_PROVIDERS can add or
override entries with its `prices` field. The built-in figures are OpenAI's list prices in USD
converted at :data:`USD_TO_CHF`; they drift, so a deployment that bills by them should set its
own.

A model the table does not know costs None — unknown, not free. Dated snapshots
("gpt-4o-mini-2024-07-18", "gpt-4-0613") use the price of their base model. Cached input tokens
are charged as ordinary input (an upper bound).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPrice:
    """CHF per one million input tokens and per one million output tokens."""

    input_chf_per_million: float
    output_chf_per_million: float


USD_TO_CHF = 0.80
"""The rate the built-in table was converted at (2025)."""

_USD_PER_MILLION: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
}

DEFAULT_PRICES: dict[str, ModelPrice] = {
    model: ModelPrice(round(inp * USD_TO_CHF, 6), round(out * USD_TO_CHF, 6))
    for model, (inp, out) in _USD_PER_MILLION.items()
}
"""The built-in table: model → CHF per million input / output tokens."""

_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(model: str | None, overrides: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model`: `overrides` first, then the built-in table; None when unknown.

    An exact name wins; else the name without a date suffix ("-2024-07-18" or "-0613").
    """
    if not model:
        return None
    tables = [overrides or {}, DEFAULT_PRICES]
    for name in (model, _SNAPSHOT.sub("", model)):
        for table in tables:
            if name in table:
                return table[name]
    return None


def cost_chf(model: str | None, usage: Mapping[str, int] | None,
             overrides: Mapping[str, ModelPrice] | None = None) -> float | None:
    """The cost of one call in CHF, or None when the model's price or the token counts are unknown.

    Args:
        model: The model that answered.
        usage: Token counts as the provider reports them (prompt_tokens, completion_tokens).
        overrides: A provider's own prices, consulted before the built-in table.
    """
    price = price_for(model, overrides)
    if price is None or not usage or "prompt_tokens" not in usage:
        return None
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    return (prompt * price.input_chf_per_million + completion * price.output_chf_per_million) / 1_000_000
