import pytest

from pipeline.errors import PermanentError, RateLimited, TransientError
from pipeline.llm.http import error_for_status, retry_after_seconds


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, RateLimited), (408, TransientError), (409, TransientError), (500, TransientError),
     (503, TransientError), (504, TransientError), (400, PermanentError), (401, PermanentError),
     (403, PermanentError), (404, PermanentError), (422, PermanentError), (418, PermanentError)],
)
def test_each_status_maps_to_its_branch_of_the_error_tree(status, kind):
    error = error_for_status(status, "detail", where="openai extract_facts (m)")
    assert type(error) is kind
    assert "HTTP %d" % status in str(error) and "openai extract_facts (m)" in str(error)


def test_a_rate_limit_keeps_its_retry_after():
    assert error_for_status(429, "slow down", where="w", retry_after=3.0).retry_after == 3.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "12"}, 12.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_is_read_from_seconds_milliseconds_or_an_http_date(headers, seconds):
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(headers, now=now) == seconds


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [(429, "insufficient_quota", "billing: the account has no quota left"),
     (400, "API_KEY_INVALID", "authentication failed: the API key is not valid")],
)
def test_error_codes_that_change_a_status_meaning_are_permanent_with_their_reason(status, code, reason):
    error = error_for_status(status, "detail", where="w", code=code)
    assert type(error) is PermanentError and reason in str(error) and code in str(error)


@pytest.mark.parametrize("status", [0, None])
def test_an_error_without_an_http_status_is_never_reported_as_http_0(status):
    error = error_for_status(status, "socket closed", where="w")
    assert isinstance(error, TransientError) and "HTTP 0" not in str(error) and "socket closed" in str(error)
