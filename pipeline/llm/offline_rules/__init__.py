"""The deterministic rules behind the offline LLM provider, one module per operation.

Each rule reads the structured ``inputs`` of an ``LLMRequest`` (never the prose prompt) and
returns a plain dict in the shape of that operation's answer model.
"""
