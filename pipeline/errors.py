"""One error tree. Retries are decided by type, never by matching message strings.

    PipelineError
    ├── TransientError          retry with backoff and jitter (timeouts, 429, 5xx, lost leases)
    │   ├── RateLimited         carries the provider's Retry-After, honoured by the retry
    │   ├── Throttled           a shared provider limit has no turn now: sent again when it has
    │   │   └── SpendDeferred   the agent is over a hard spend cap: sent again, without bound,
    │   │                       until the window rolls or the cap is raised
    │   ├── InvalidLLMAnswer    unparsable or schema-violating answer: asked again, bounded
    │   └── StoreUnavailable    the store's driver said "not now" (failover, lost connection,
    │       │                   a lock held past the busy timeout): retried, never recorded
    │       │                   in that same store, never acked away
    │       └── StoreFileMissing  the SQLite file was deleted under the process: refused
    │                           (with the path) until a file is there again
    ├── PermanentError          fail the run at once with this reason (auth, bad request)
    │   └── ConfigurationError  a missing SDK, key or setting; the message says how to fix it
    └── InvalidInput            bad input from a caller: a clear what/where/why, never retried
        ├── Refused             refused for what it carries (a secret, contact data)
        └── Duplicate           the text is already stored: names the item that holds it
"""

from __future__ import annotations


class PipelineError(Exception):
    """Root of every error the pipeline raises on purpose."""


class TransientError(PipelineError):
    """Worth retrying: the same call may succeed later."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(TransientError):
    """The provider said 429; ``retry_after`` holds its Retry-After in seconds, if it gave one."""


class Throttled(TransientError):
    """A shared provider rate limit (``pipeline.llm.rates``) has no turn for this call yet;
    ``retry_after`` is when it will. Not a failure: the task is sent again with that countdown."""


class SpendDeferred(Throttled):
    """The run's agent is over a hard spend cap (``pipeline.caps``): the stage waits, sent again
    with a countdown (``retry_after``: until the window rolls, bounded by the lease) as often as
    it takes; its events stay stored meanwhile."""


class InvalidLLMAnswer(TransientError):
    """The model's answer did not parse or did not match its schema. Never read as 'nothing'."""


class StoreUnavailable(TransientError):
    """The store cannot be reached or written just now (a replica-set failover, a lost
    connection, SQLite's write lock held past the busy timeout). Only the driver errors their
    documentation calls retryable become this (``pipeline.store._unavailable``); anything else
    (a schema or integrity error, a bad query) stays what it is."""


class StoreFileMissing(StoreUnavailable):
    """The SQLite file was deleted while the process had it open: nothing is read from the
    deleted copy; the message names the path and how to recreate it."""


class PermanentError(PipelineError):
    """Retrying cannot help; the run fails at once with this reason."""


class ConfigurationError(PermanentError):
    """A missing optional SDK, key or setting. The message says what to install or set."""


class InvalidInput(PipelineError, ValueError):
    """A caller passed bad input. The message names the field and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Refused(InvalidInput):
    """Input refused for what it carries (a secret, contact data where it may not go), not for
    its form: the message names the kind found, never the text."""

    what = "refused"


class Duplicate(InvalidInput):
    """A direct write of a text its scope already holds (the same normalized-text hash):
    refused, naming the item that holds it (``existing_id``), so that a retry is harmless."""

    what = "duplicate"

    def __init__(self, field: str, existing_id: str, kind: str = "fact") -> None:
        super().__init__(field, f"{kind} {existing_id} already says this (the same text, ignoring case and spacing)")
        self.existing_id = existing_id


class NotStored(InvalidInput):
    """Input naming something the store does not hold (a session that never was, or was
    erased): the doors answer it as not found (404), naming the field."""

    what = "not found"


class LeaseLost(TransientError):
    """Another worker took over this run or scope; this one must stop without side effects."""
