"""workers.client builds the agent runtime's MemoryService wired to the worker queues."""

import pytest

from pipeline.errors import ConfigurationError
from pipeline.service import MemoryService
from schemas.settings import Settings
from workers import client
from workers.producer import CeleryPublisher


def test_the_runtime_service_publishes_through_celery_and_starts_runs_on_the_queues(tmp_path):
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'm.db'}", embedding_provider="hashing")
    service = client.memory_service("a1", settings=settings)
    assert isinstance(service, MemoryService) and isinstance(service.publisher, CeleryPublisher)
    assert service._run_starter is client.start_run
    assert service.store.__class__.__name__ == "SQLiteStore"
    service.store.close()


def test_injected_clients_win(tmp_path):
    started = []
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'm.db'}", embedding_provider="hashing")
    service = client.memory_service("a1", settings=settings, run_starter=started.append, publisher="p")
    assert service.publisher == "p" and service._run_starter == started.append
    service.store.close()


def test_wait_over_a_broker_of_other_processes_says_how_to_form_in_this_one(tmp_path):
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'm.db'}", embedding_provider="hashing")
    service = client.memory_service("a1", settings=settings)
    with pytest.raises(ConfigurationError, match="MEMORY_BROKER_URL=memory://"):
        service.wait(session_id="s-42")
    service.store.close()
