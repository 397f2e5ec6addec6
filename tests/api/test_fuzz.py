"""Schemathesis runs the committed OpenAPI document against the live app, served by uvicorn
over HTTP, with an admin key (it reaches every route): no 500, no status, content type, header
or body outside the document, and no request outside it accepted. Bounded examples per
operation, so ``make test`` stays short.

Left out: the check that every schema-valid request is accepted. Rules the document cannot
state refuse some (a session belongs to the agent that first used it; an edit must not carry a
secret), with a 4xx in the one error shape, which the other checks still hold to. A report of
"negative data accepted" that names no broken part is dropped: the broken part never reached
the request (the credential this test sends replaced a broken one the fuzzer made)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.failures import AcceptedNegativeData, FailureGroup

from tests.api.harness import build, seed_memory
from testkit import hostile
from testkit.procs import free_port

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.config.phases.examples.fill_missing = True  # one generated example per operation: the hostile ones' base
STATUSES: dict[int, int] = {}  # status code -> answers, over the whole run
HOSTILE: dict[str, int] = {}  # operation -> hostile examples added


@schemathesis.serializer("application/x-ndjson")
def _json_lines(ctx, value):
    """A JSON Lines body (``POST …/import``) is text, its lines JSON: a string is sent as its
    UTF-8 bytes, anything else as one line of JSON."""
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else json.dumps(value).encode()


@schema.hook
def before_add_examples(context, examples):
    """Each operation's explicit examples gain its first example with one part at a time made
    hostile (``testkit.hostile``): every path and query parameter, every leaf of the body, an
    absent date-time field, and the body nested 10,000 deep. Generated strings never hold a lone
    surrogate or a NUL, nor date-times at year 1 or 9999: these examples do, on every route."""
    if not examples:
        return
    base, operation = examples[0], context.operation

    def case(**changed):
        parts = {"path_parameters": base.path_parameters, "query": base.query, "body": base.body,
                 "media_type": base.media_type, **changed}
        return operation.Case(**{k: v for k, v in parts.items() if v is not None})

    added = [case(path_parameters={**base.path_parameters, name: value})
             for name in base.path_parameters or {} for value in hostile.URL_TEXT]
    for parameter in operation.query:
        added += [case(query={**(base.query or {}), parameter.name: str(value)})
                  for value in hostile.for_parameter(parameter.definition.get("schema", {}))]
    if isinstance(base.body, (dict, list)):
        times = ("as_of",) if "as_of" in json.dumps(operation.definition.raw) else ()
        added += [case(body=body) for _, body in hostile.variants(base.body, times=times)]
        added.append(case(body=hostile.nested(base.body)))
    HOSTILE[f"{operation.method.upper()} {operation.path}"] = len(added)
    examples.extend(added)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import uvicorn

    from pipeline.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path_factory.mktemp("fuzz") / "memory.db"))
    store.create_indexes()
    api = build(store)
    seed_memory(store, api.deps.clock.now())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api.app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    yield f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {api.keys['admin']}"}
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_500_and_no_answer_outside_the_document(case, served):
    base_url, headers = served
    if _negative_credential(case):
        return  # our valid credential replaces the broken one it made: nothing invalid would be sent
    response = case.call(base_url=base_url, headers=headers)
    STATUSES[response.status_code] = STATUSES.get(response.status_code, 0) + 1
    try:
        case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance],
                               transport_kwargs={"base_url": base_url, "headers": dict(headers)})
    except FailureGroup as group:
        real = [f for f in group.exceptions if not _unnamed_negative(f)]
        if real:
            raise FailureGroup(real, str(group)) from None


#: broken parts a negative case names that never reach the wire: our credential replaces a
#: missing or broken Authorization header, and a query value made an object or an array is
#: sent as a plain string (a query string has no types), which is a valid value
_UNREACHED = ("header: violates `required` (was Authorization)", "became object)", "became array)")


def _unnamed_negative(failure) -> bool:
    """A "negative data accepted" report whose broken parts all failed to reach the request
    (none named, or only those of ``_UNREACHED``): what was sent was valid."""
    if not isinstance(failure, AcceptedNegativeData):
        return False
    parts = failure.message.rstrip().split("Invalid component:")[-1].strip().splitlines()
    return all(part.strip().startswith("- query:") and part.rstrip().endswith(_UNREACHED[1:])
               or part.strip().startswith("- header:") and part.rstrip().endswith(_UNREACHED[0])
               for part in parts if part.strip())


def _negative_credential(case) -> bool:
    """A negative case whose broken part is a header (the bearer scheme's)."""
    meta = case.meta
    data = getattr(getattr(meta, "phase", None), "data", None)
    location = getattr(data, "parameter_location", None)
    return bool(meta and meta.generation.mode.is_negative and location is not None
                and location.name.lower() == "header")


def test_the_fuzzer_was_let_in(served):
    """Every route answers 401 to a missing credential, inside the document: a run that never
    got past authentication would find nothing and pass."""
    accepted = sum(n for code, n in STATUSES.items() if code < 300)
    assert accepted >= 100 and accepted > STATUSES.get(401, 0), STATUSES


def test_every_operation_was_sent_hostile_examples(served):
    """The hostile examples ran: every operation with a parameter or a body had some, and they
    were answered (the 4xx they draw are counted with the rest)."""
    operations = {f"{m.upper()} {p}" for p, methods in DOCUMENT["paths"].items() for m in methods if p != "/healthz"}
    assert operations <= {op for op, n in HOSTILE.items() if n > 0}, sorted(operations - set(HOSTILE))
    assert STATUSES.get(422, 0) + STATUSES.get(400, 0) >= sum(HOSTILE.values()) // 2, (STATUSES, HOSTILE)
