"""Secrets never print; redact_config removes every credential value from a config mapping."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from migrator.redact import REDACTED, SECRET_KEYS, Secret, redact_config

PLANTED = "planted-redact-secret-3c5d"


def test_secret_repr_and_str_never_show_the_value():
    secret = Secret(PLANTED)

    for text in (str(secret), repr(secret), f"{secret}", f"{secret!r}", "%s" % secret, "%r" % (secret,),
                 repr([secret]), repr({"k": secret}), str((secret,))):
        assert PLANTED not in text
    assert str(secret) == REDACTED == "<redacted>"
    assert repr(secret) == "Secret('<redacted>')"


def test_secret_reveals_only_on_request():
    assert Secret(PLANTED).reveal() == PLANTED


def test_secret_is_frozen_comparable_and_hashable():
    secret = Secret(PLANTED)
    assert secret == Secret(PLANTED)
    assert secret != Secret("other")
    assert len({secret, Secret(PLANTED)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        secret._value = "changed"  # type: ignore[misc]
    assert secret.reveal() == PLANTED


def test_secret_survives_pickling_to_executors():
    copy = pickle.loads(pickle.dumps(Secret(PLANTED)))
    assert copy.reveal() == PLANTED
    assert PLANTED not in repr(copy)


def test_secret_keys_are_the_credential_values():
    assert SECRET_KEYS == {"accessKey", "secretKey", "sessionToken"}


def test_redact_config_replaces_credentials_at_any_depth():
    raw = {
        "accessKey": "top-level-key",
        "source": {
            "type": "dynamodb",
            "table": "src",
            "credentials": {
                "accessKey": "AKIA1",
                "secretKey": PLANTED,
                "sessionToken": "token-1",
                "assumeRole": {"arn": "arn:aws:iam::123456789012:role/r", "sessionName": "s"},
            },
        },
        "target": {
            "type": "dynamodb-s3-export",
            "streamSource": {"credentials": {"accessKey": "AKIA2", "secretKey": "deep-secret"}},
        },
        "renames": [{"from": "a", "to": "b"}, {"nested": [{"secretKey": "in-a-list"}]}],
    }

    redacted = redact_config(raw)

    assert redacted == {
        "accessKey": REDACTED,
        "source": {
            "type": "dynamodb",
            "table": "src",
            "credentials": {
                "accessKey": REDACTED,
                "secretKey": REDACTED,
                "sessionToken": REDACTED,
                "assumeRole": {"arn": "arn:aws:iam::123456789012:role/r", "sessionName": "s"},
            },
        },
        "target": {
            "type": "dynamodb-s3-export",
            "streamSource": {"credentials": {"accessKey": REDACTED, "secretKey": REDACTED}},
        },
        "renames": [{"from": "a", "to": "b"}, {"nested": [{"secretKey": REDACTED}]}],
    }
    for secret in ("top-level-key", "AKIA1", PLANTED, "token-1", "AKIA2", "deep-secret", "in-a-list"):
        assert secret not in repr(redacted)


def test_redact_config_leaves_the_original_untouched():
    raw = {"source": {"credentials": {"accessKey": "AKIA", "secretKey": PLANTED}}}

    redact_config(raw)

    assert raw == {"source": {"credentials": {"accessKey": "AKIA", "secretKey": PLANTED}}}


def test_redact_config_replaces_non_string_and_secret_values():
    raw = {"credentials": {"accessKey": 12345, "secretKey": Secret(PLANTED), "sessionToken": {"nested": "x"}}}
    assert redact_config(raw) == {"credentials": {"accessKey": REDACTED, "secretKey": REDACTED,
                                                  "sessionToken": REDACTED}}


def test_redact_config_keeps_absent_credentials_absent():
    raw = {"credentials": {"accessKey": None, "secretKey": None}}
    assert redact_config(raw) == raw


def test_redact_config_passes_scalars_and_lists_through():
    assert redact_config("text") == "text"
    assert redact_config(None) is None
    assert redact_config([{"accessKey": "x"}, 3]) == [{"accessKey": REDACTED}, 3]


@pytest.mark.parametrize("key", ["spark.hadoop.fs.s3a.access.key", "fs.s3a.secret.key", "my.access_key",
                                 "x.accessKey", "x.sessionToken", "x.session_token", "x.credentials"])
def test_sparks_redaction_regex_covers_every_spelling_of_a_credential_key(key):
    import re

    from migrator.spark import REDACTION_REGEX

    assert re.search(REDACTION_REGEX, key)
