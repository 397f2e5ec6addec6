"""Shipped prices, USD per million tokens, of the default models (``Settings.price_table``).

Only prices read on the provider's own pages are shipped; a default model whose official
price could not be confirmed is left out on purpose, so it shows as "unpriced" until
``MEMORY_PRICES`` gives it one (never a guessed figure, never 0):

- ``gpt-6-luna``: $0.10 input, $0.50 output (standard processing, prompts up to 272K input
  tokens; cached input $0.01 is not modelled), OpenAI's model page
  https://developers.openai.com/api/docs/models/gpt-6-luna (read in its ja-JP edition,
  https://developers.openai.com/ja-JP/api/docs/models/gpt-6-luna)
- ``gpt-6.1-sol``: no official OpenAI page found (only third parties quoting $2 / $10); unpriced.
- ``gemini-3.8-flash``: https://ai.google.dev/gemini-api/docs/pricing gives the input price
  ($0.75, "through December 31, 2026") but no output price could be confirmed; unpriced.
- ``gemini-3.1-pro-preview``: no official Google page found (third parties quote $2 / $12 up to
  200K tokens); unpriced.
- ``text-embedding-3-small``: no official OpenAI page found (third parties quote $0.02); unpriced.
- ``gemini-embedding-001``: no official Google page found (third parties quote $0.15); unpriced.
"""

from __future__ import annotations

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-6-luna": {"input": 0.10, "output": 0.50},
}
