"""Webhooks (design §13 "Operator controls"): signed, at-least-once notices to an agent's
subscribers when its memory changes. ``signing`` (Standard Webhooks), ``events`` (what a run,
an erasure or a cap announces), ``delivery`` (what one attempt sends and what follows it)."""
