"""The secret guard: what counts as a secret, and the near-misses that stay memory."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.formation.secrets import SecretGuard, iban_valid, luhn_valid
from schemas.settings import Settings

SECRETS = [
    # passwords, passphrases and PINs given in context
    ("My password is hunter2", "password"),
    ("Alice's wifi passphrase: correct horse battery staple", "password"),
    ("pw: tr0ub4dor&3", "password"),
    ("The password for the office wifi is Lumen2026!", "password"),
    ("Alice's PIN is 4821", "password"),
    ("The door code passcode = 9911", "password"),
    ("Alice's bank password was changed to 'S3cure-Pass'", "password"),
    ("The guest wifi has the password hunter2", "password"),
    ("Door PIN 4821", "password"),
    # a word connector is a whole word: "are" inside "shared" once ended the match too early
    ("Password for the shared drive: tulip42", "password"),
    ("Password for the shared drive is tulip42", "password"),
    ("The passcode for the spare room = 7731", "password"),
    # passphrases: plain words going on after a describing word
    ("my passphrase is correct horse battery staple", "password"),
    ("The vault passphrase is correct horse battery staple.", "password"),
    ("Our pass phrase is blue orchid river stone", "password"),
    ("The wifi password is correct horse battery", "password"),
    # API keys and tokens by prefix
    ("The OpenAI key is sk-proj-abcdEFGH1234ijklMNOP5678qrst", "api_key"),
    ("Use sk-abcdefghijklmnop1234 for the test account", "api_key"),
    ("Deploy token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz012345", "api_key"),
    ("The bot uses xoxb-123456789012-abcdefghijkl", "api_key"),
    ("The AWS access key id is AKIAIOSFODNN7EXAMPLE", "api_key"),
    ("Maps key AIzaSyA-1234567890abcdefghijklmnopqrstu", "api_key"),
    ("CI runs with glpat-abcdefghij1234567890", "api_key"),
    ("Send Authorization: Bearer abcdef1234567890abcdef", "api_key"),
    ("The session token is eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "api_key"),
    ("-----BEGIN RSA PRIVATE KEY----- is pasted in the wiki", "api_key"),
    # high-entropy values next to key, token or secret
    ("The API key is 9fK2mQ7xLp3Rt8Vw", "api_key"),
    ("client secret: Zq8vN3kLw0Pt5RbY2mXc", "api_key"),
    ("The webhook secret is 3f9a2c4e5b6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f", "api_key"),
    # payment cards (Luhn) and IBANs (mod 97)
    ("Alice's card is 4111 1111 1111 1111", "card"),
    ("Pay with 5555-5555-5555-4444", "card"),
    ("The corporate Amex is 3782 822463 10005", "card"),
    ("Order 12 4111-1111-1111-1111 was charged", "card"),
    ("The venue's IBAN is DE89 3704 0044 0532 0130 00", "iban"),
    ("Transfer to GB82WEST12345698765432 by Friday", "iban"),
    ("iban: fr14 2004 1010 0505 0001 3m02 606", "iban"),
    # user:password pairs, URLs carrying a password, a username stated with a password
    ("Use credentials admin:Tr0ub4dor&3 for the office router", "credentials"),
    ("ssh root:Winter2026! on the build box", "credentials"),
    ("The router takes admin:Xk9#mQ2v", "credentials"),                  # generated-looking alone
    ("postgres://admin:s3cretpw@db.internal:5432/app", "credentials"),
    ("The cache is redis://:hunter2@cache.internal:6379/0", "credentials"),
    ("Deploy from https://deploy:gh0st-Rider@git.lumen.example/app.git", "credentials"),
    ("Login for the CMS: maya / Sunflower!9", "credentials"),
    ("login: maya/Sunflower!9", "credentials"),
    ("The staging credentials are tom and Qu4rtz#7", "credentials"),
    ("username maya, pass Sunflower!9", "credentials"),
    ("user: priya pw: Mango#2026", "password"),                          # the pw keyword says it first
    # government identifiers with their context words
    ("Maya's social security number is 123-45-6789", "government_id"),
    ("SSN: 078-05-1120", "government_id"),
    ("Her passport number is X12345678", "government_id"),
    ("passport no. C03005988, valid until 2031", "government_id"),
    ("Tom's national ID is 12345678Z", "government_id"),
    ("Her national insurance number is QQ 12 34 56 C", "government_id"),
    ("The driver's licence number for Priya is D1234567", "government_id"),
    # access codes with their digits
    ("The door code is 4821", "access_code"),
    ("the code for the front gate: 1234#", "access_code"),
    ("Safe combination 12-34-56", "access_code"),
    ("Alarm code 0000, disarm it first", "access_code"),
    ("The garage code was changed to 7731", "access_code"),
    ("The lockbox code for the flat is 5150", "access_code"),
]

KEPT = [
    "Alice forgot her password",                         # a mention, no value
    "The password is wrong",                              # a description, not the value
    "Passwords are rotated monthly",
    "Alice asked for a password reset",
    "The team uses a password manager",
    "Pin 2 links in the channel",                          # a count, not a value
    "pin: the venue map for the crew",                     # a pinned link, not a PIN
    "Alice's PIN is in the drawer",
    "The key point is that the venue is booked",          # "key" without a value
    "The key to the storage room is at reception",
    "Fixed in commit 3f9a2c4e5b6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f",   # a commit sha is team knowledge
    "The token budget is 1500 per formation",
    # ordinary sentences about passwords: a description, then the sentence goes on
    "The password is correct",
    "The password is correct, Maya said",
    "The password is correct so you can log in now",
    "The password is stored in the vault",
    "The password is wrong again today",
    "The password is shared with the whole team",
    "Passwords for the shared drives are rotated monthly",
    "The password for the shared drive is in the vault",
    "The passphrase is long and hard to type",
    "The password is case sensitive",
    "The password is different for every account",
    "Our password policy is strict about length",
    "Order number 4111 1111 1111 1112 ships Monday",      # 16 digits that fail Luhn
    "Tracking number 1234 5678 9012 3456 7",              # starts like no card
    "Call +49 1511 2345 6789 0 after six",                # a phone number, not a card
    "The IBAN DE89 3704 0044 0532 0130 01 was rejected",  # check digits fail
    "Maya Chen's email is maya@lumen.example",
    "The budget is 12,000 euros and the launch is on 2026-03-14",
    "The secret santa draw is on Friday",
    "Sky-high expectations for the launch",               # "sk" inside a word
    # near-misses of credentials: times, ratios, ports, versions, URLs without a password
    "The meeting is at 10:30",
    "Call the office at 10:30 about the account",
    "Mix the paint 3:2",
    "The slides are 16:9",
    "John 3:16 is her favourite verse",
    "See https://example.com/docs for the agenda",
    "The cache is redis://localhost:6379/0",
    "Connect to db.internal:5432",
    "postgres://admin:***@db.internal/app is the masked form",   # masked: no password in it
    "Write it as postgres://admin:${DB_PASSWORD}@db/app",         # templated
    "Clone https://maya@git.lumen.example/app.git",              # a user, no password
    "Build on python:3.11-slim and nginx:1.25-alpine",
    "Upgrade to version 3.11.2",
    "Set the user:group to www-data:www-data",
    "std::vector is fine here",
    "Note: the venue opens at 9",
    "Login for the demo: Maya, 10am",
    "Account for the launch: Maya, 12,000 euros",
    "The login page is at /admin",
    "The user Maya passed 3 exams",
    "The budget is 12,000 euros",
    "The launch moves to March 21",
    "Maya lives at 12 Rua Augusta, Lisbon",
    # near-misses of government identifiers and access codes
    "Maya's passport expires in 2027",
    "The order ID number is 12345678",
    "Her employee ID number is 482913",
    "Renew the passport before 2026-03-21",
    "Her passport number is in the safe",
    "The social security office is at 1200 Main Street",
    "The dress code is smart casual",
    "The gate code changed last week",
    "The door code is on the fridge",
    "The door code has 4 digits",
    "The alarm goes off at 6:30",
    "Zip code 94107 for the venue",
]


@pytest.mark.parametrize(("text", "kind"), SECRETS)
def test_secrets_are_recognised_with_their_kind(text, kind):
    assert SecretGuard().kind(text) == kind


@pytest.mark.parametrize("text", KEPT)
def test_near_misses_are_not_secrets(text):
    assert SecretGuard().kind(text) is None


@pytest.mark.parametrize(("digits", "valid"), [("4111111111111111", True), ("4111111111111112", False),
                                               ("79927398713", True), ("79927398710", False)])
def test_luhn(digits, valid):
    assert luhn_valid(digits) is valid


@pytest.mark.parametrize(("iban", "valid"), [("DE89370400440532013000", True), ("GB82WEST12345698765432", True),
                                             ("GB82WEST12345698765433", False), ("DE8937040044", False)])
def test_iban_check_digits(iban, valid):
    assert iban_valid(iban) is valid


def test_settings_patterns_extend_the_guard():
    settings = Settings(_env_file=None, secret_patterns=[r"\bACME-\d{6}\b"])
    guard = SecretGuard(settings.secret_patterns)
    assert guard.kind("The licence is ACME-123456") == "custom"
    assert guard.kind("ACME-12 is a model name") is None


def test_secret_patterns_are_read_from_a_json_list(monkeypatch):
    monkeypatch.setenv("MEMORY_SECRET_PATTERNS", r'["\\bACME-\\d{6}\\b", "vault:[a-z]+"]')
    assert Settings(_env_file=None).secret_patterns == [r"\bACME-\d{6}\b", "vault:[a-z]+"]


@pytest.mark.parametrize(("value", "message"), [
    ('["a(b"]', "pattern 0 ('a(b') is not a valid regular expression"),
    ("not json", "expected a JSON list of regular expressions"),
    ('{"a": 1}', "expected a JSON list of regular expressions"),
])
def test_an_invalid_secret_pattern_is_a_clear_settings_error(monkeypatch, value, message):
    monkeypatch.setenv("MEMORY_SECRET_PATTERNS", value)
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None)
    [error] = caught.value.errors()
    assert error["loc"] == ("secret_patterns",)
    assert message in error["msg"]
