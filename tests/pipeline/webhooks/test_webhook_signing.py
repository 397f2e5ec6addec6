"""Standard Webhooks signatures: the specification's own vector, rotation, and what a
receiver with the reference library accepts."""

from __future__ import annotations

import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pipeline.webhooks import signing

# The reference vector of the Standard Webhooks test suite.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_the_specifications_vector_signs_as_specified():
    body = b'{"test": 2432232314}'
    assert signing.sign(VECTOR_SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_during_a_rotation_a_receiver_with_either_secret_verifies():
    old, new = signing.new_secret(), signing.new_secret()
    body = b'{"type":"fact.created"}'
    headers = signing.headers([new, old], "msg_1", int(time.time()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(body, headers)


def test_a_changed_body_does_not_verify():
    secret = signing.new_secret()
    headers = signing.headers([secret], "msg_1", int(time.time()), b'{"a":1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"a":2}', headers)


@pytest.mark.parametrize("secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_AAAA"])
def test_a_secret_that_is_not_a_whsec_key_is_refused(secret):
    with pytest.raises(ValueError):
        signing.sign(secret, "msg_1", 1, b"{}")
