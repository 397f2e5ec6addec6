"""Read and set an agent's filterable metadata keys (design §13 "Categories and metadata"):
the one entry point of ``GET|PUT /v1/agents/{a}/metadata-keys``, ``memoryctl metadata-keys``
and Python.

    from usecases import metadata_keys
    metadata_keys.set_keys(store.ingest, "juniper", ["project", "channel"], now=now)
    metadata_keys.show(store.ingest, "juniper").keys

Facts formed afterwards keep these keys of their messages' metadata; facts already formed keep
what they have. A change's result names its audit entry (``audit``), which the door records
under who asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pipeline.owner import metadata_keys as rules
from pipeline.store.ports.ingest import IngestStore
from usecases.audit import Audited


@dataclass(frozen=True)
class MetadataKeys:
    """An agent's filterable keys now ([]: none, the default)."""

    agent_id: str
    keys: list[str]

    @property
    def audit(self) -> Audited:
        return Audited("metadata_keys.set", self.agent_id, "metadata_keys", {"keys": len(self.keys)})


def show(ingest: IngestStore, agent_id: str) -> MetadataKeys:
    return MetadataKeys(agent_id, list(ingest.get_agent_settings(agent_id).metadata_keys))


def set_keys(ingest: IngestStore, agent_id: str, keys: Sequence[object], *, now: datetime,
             where: str = "metadata_keys") -> MetadataKeys:
    """``keys`` become the filterable ones; ``InvalidInput`` naming the first bad one
    (``where[i]``), nothing changed."""
    updated = rules.set_keys(ingest.get_agent_settings(agent_id), keys, now=now, where=where)
    ingest.put_agent_settings(updated)
    return MetadataKeys(agent_id, list(updated.metadata_keys))
