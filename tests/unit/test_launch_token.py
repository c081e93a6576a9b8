"""Join tokens and the signed JSON in the job store: parse, verify, and refuse anything forged."""

from __future__ import annotations

import json
import pickle

import pytest

from ddpkit.errors import ConfigError, JobFailed
from ddpkit.launch.token import JoinToken, new_token, parse_token, sign, verify

TOKEN = JoinToken(address="10.0.0.2", port=29400, run_id="0a1b2c3d4e5f",
                  secret="s3cr3t-s3cr3t-s3cr3t-XYZ_123")


def test_round_trip_and_format() -> None:
    text = str(TOKEN)
    assert text == "ddpk://10.0.0.2:29400/0a1b2c3d4e5f/s3cr3t-s3cr3t-s3cr3t-XYZ_123"
    assert parse_token(text) == TOKEN
    assert parse_token(f"  ddpkit join {text}\n") == TOKEN  # the whole printed line works too


def test_ipv6_token() -> None:
    token = JoinToken(address="fd00::2", port=29400, run_id="abcd", secret="x" * 20)
    assert str(token).startswith("ddpk://[fd00::2]:29400/")
    assert parse_token(str(token)) == token


def test_new_tokens_are_fresh() -> None:
    a, b = new_token("10.0.0.2", 29400), new_token("10.0.0.2", 29400)
    assert a.run_id != b.run_id and a.secret != b.secret
    assert parse_token(str(a)) == a and len(a.secret) >= 24


@pytest.mark.parametrize("text", [
    "http://10.0.0.2:29400/abcd/xxxxxxxxxxxxxxxxxxxx",
    "ddpk://10.0.0.2:29400/abcd",
    "ddpk://10.0.0.2/abcd/xxxxxxxxxxxxxxxxxxxx",
    "ddpk://node0:29400/abcd/xxxxxxxxxxxxxxxxxxxx",
    "ddpk://10.0.0.2:99999/abcd/xxxxxxxxxxxxxxxxxxxx",
    "ddpk://300.0.0.2:29400/abcd/xxxxxxxxxxxxxxxxxxxx",
    "ddpk://10.0.0.2:29400/abcd/short",
    "ddpk://10.0.0.2:29400/abcd/xxxxxxxxxxxxxxxxxxxx;rm",
])
def test_bad_tokens_are_refused(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_token(text)
    assert caught.value.error_id == "bad-token"


def test_a_bad_token_error_does_not_echo_the_secret() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_token("ddpk://10.0.0.2:29400/abcd/topsecretvalue123456!")
    assert "topsecretvalue" not in caught.value.message


def test_signed_values_verify_and_are_plain_json() -> None:
    raw = sign(TOKEN, "job", {"entry": "train.py", "nnodes": 3})
    envelope = json.loads(raw)
    assert set(envelope) == {"body", "mac"} and TOKEN.secret not in raw.decode()
    assert verify(TOKEN, "job", raw) == {"entry": "train.py", "nnodes": 3}


def test_tampering_a_value_is_detected() -> None:
    envelope = json.loads(sign(TOKEN, "job", {"entry": "train.py"}))
    envelope["body"] = envelope["body"].replace("train.py", "evil.py")
    with pytest.raises(JobFailed) as caught:
        verify(TOKEN, "job", json.dumps(envelope).encode())
    assert caught.value.error_id == "token-rejected"


def test_another_secret_or_another_key_is_rejected() -> None:
    raw = sign(TOKEN, "node/1", {"host": "node1"})
    other = JoinToken(TOKEN.address, TOKEN.port, TOKEN.run_id, "another-secret-entirely-0000")
    with pytest.raises(JobFailed):
        verify(other, "node/1", raw)
    with pytest.raises(JobFailed):
        verify(TOKEN, "node/2", raw)  # a value replayed under another key


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"body": 1, "mac": "x"}',
                                 pickle.dumps({"body": "{}", "mac": "x"})])
def test_anything_but_signed_json_is_rejected(raw: bytes) -> None:
    with pytest.raises(JobFailed) as caught:
        verify(TOKEN, "job", raw)
    assert caught.value.error_id == "token-rejected"
