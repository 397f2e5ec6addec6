"""A search never mixes embedding models (design §13 "Offline models").

Vectors of two models are not comparable: a query embedded by one model scored against facts
embedded by another ranks noise. Each branch already compares only vectors of the query's
model, so a store half moved to a new model would answer from its other half without a word;
instead a search of an agent holding live vectors of another model refuses, naming the
command that moves the store (``memoryctl reembed``, resumable).
"""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from pipeline.store.ports.facts import FactStore


def check_one_model(facts: FactStore, agent_id: str, model: str) -> None:
    """Refuse when a live fact of ``agent_id`` carries a vector of a model other than ``model``."""
    other = facts.other_embedding_model(agent_id, model)
    if other is not None:
        raise ConfigurationError(
            f"agent {agent_id}'s facts hold vectors of {other}, but searches embed with {model}: run "
            f"`memoryctl reembed` with this embedder's settings to move them to {model} (or configure {other} again)")
