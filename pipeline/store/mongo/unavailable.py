"""Which pymongo errors mean "the server is not there just now" (``StoreUnavailable``).

- ``ConnectionFailure`` and its subclasses: ``AutoReconnect`` ("a connection to the database
  is lost ... the operation which caused it has not necessarily succeeded. Future operations
  will attempt to open a new connection"), ``NetworkTimeout``, ``NotPrimaryError`` (the
  primary stepped down or is shutting down: a failover), ``ServerSelectionTimeoutError`` (no
  suitable server within ``serverSelectionTimeoutMS``) and ``WaitQueueTimeoutError`` (the
  connection pool stayed full). https://pymongo.readthedocs.io/en/stable/api/pymongo/errors.html
- an ``OperationFailure`` the server labels ``RetryableWriteError``, or whose code is one the
  retryable-writes specification lists as retryable (not-primary, node-recovering and
  shutting-down codes, network errors, ``ExceededTimeLimit``); the driver has then already
  spent its one automatic retry. https://github.com/mongodb/specifications/blob/master/source/retryable-writes/retryable-writes.md#determining-retryable-errors
  (the same set is ``_RETRYABLE_ERROR_CODES`` in pymongo's ``helpers_shared.py``).

Everything else (a duplicate key, a validation or query error, a bad configuration, an
authentication failure) is not a passing outage and is left as it is.

Every store method is safe to repeat after such an error: the operation "has not necessarily
succeeded", so each one is idempotent or checks its precondition (see ``store.py``).
"""

from __future__ import annotations

from pymongo.errors import ConnectionFailure, OperationFailure

from pipeline.errors import StoreUnavailable

RETRYABLE_CODES = frozenset({
    10058, 10107, 13435, 11602, 13436, 189,  # not primary / node recovering (SDAM spec)
    11600, 91,                                # InterruptedAtShutdown, ShutdownInProgress
    7, 6, 89, 9001,                           # HostNotFound, HostUnreachable, NetworkTimeout, SocketException
    262, 134,                                 # ExceededTimeLimit, ReadConcernMajorityNotAvailableYet
})


def unavailable(exc: BaseException) -> StoreUnavailable | None:
    """``StoreUnavailable`` for a retryable driver error (module docstring), else None."""
    if isinstance(exc, ConnectionFailure):
        return StoreUnavailable(f"MongoDB unavailable ({type(exc).__name__}): {exc}")
    if isinstance(exc, OperationFailure) and (
        exc.has_error_label("RetryableWriteError") or exc.code in RETRYABLE_CODES
    ):
        return StoreUnavailable(f"MongoDB unavailable ({type(exc).__name__}, code {exc.code}): {exc}")
    return None
