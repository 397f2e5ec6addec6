"""Shipped prices, USD per million tokens, of the default models (``Settings.price_table``).

Only prices read on the provider's own pages are shipped; a default model whose official
price could not be confirmed is left out on purpose, so it shows as "unpriced" until
``MEMORY_PRICES`` gives it one (never a guessed figure, never 0):

- ``gpt-6-luna``: $0.10 input, $0.50 output (standard processing, prompts up to 272K input
  tokens), https://developers.openai.com/api/docs/models/gpt-6-luna
- ``gpt-6.1-sol``: no official OpenAI page found; unpriced.
- ``gemini-3.8-flash``: https://ai.google.dev/gemini-api/docs/pricing gives the input price
  ($0.75, "through December 31, 2026") but no output price could be confirmed; unpriced.
- ``gemini-3.1-pro-preview``: no official Google page found; unpriced.
- ``text-embedding-3-small``: no official OpenAI page found; unpriced.
- ``gemini-embedding-001``: no official Google page found; unpriced.
"""

from __future__ import annotations

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-6-luna": {"input": 0.10, "output": 0.50},
}
