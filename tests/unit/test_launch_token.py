"""Join tokens and the sealed JSON in the job store: parse, verify, and refuse anything forged."""

from __future__ import annotations

import base64
import json
import pickle

import pytest

from ddpkit.errors import ConfigError
from ddpkit.launch.join.tokens import JoinToken, Unopened, new_token, parse_token, seal, unseal
from ddpkit.launch.store_value import MAX_VALUE_BYTES, NotOurs

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


@pytest.mark.parametrize("text", [
    "ddpk://10.0.0.2:29400/abcd/topsecretvalue123456!",
    "ddpx://10.0.0.2:29400/abcd/topsecretvalue123456",  # wrong scheme
    "Xtopsecretvalue123456",  # the secret alone, pasted
    "ddpk://10.0.0.2:29400/topsecretvalue123456",
])
def test_a_bad_token_error_does_not_echo_any_part_of_the_secret(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_token(text)
    shown = caught.value.message + caught.value.hint
    secret = "topsecretvalue123456"
    assert not any(secret[i:i + 4] in shown for i in range(len(secret) - 3))
    assert "abcd" not in shown


def test_sealed_values_open_and_are_json_that_hides_the_body() -> None:
    raw = seal(TOKEN, "job", {"entry": "train.py", "nnodes": 3, "env": {"HF_TOKEN": "hf_abc123"}})
    envelope = json.loads(raw)
    assert set(envelope) == {"v", "n", "c"} and TOKEN.secret not in raw.decode()
    assert b"train.py" not in raw and b"hf_abc123" not in raw and b"HF_TOKEN" not in raw
    assert unseal(TOKEN, "job", raw)["entry"] == "train.py"
    assert seal(TOKEN, "job", {"a": 1}) != seal(TOKEN, "job", {"a": 1})  # a fresh nonce each time


def test_tampering_a_value_is_detected() -> None:
    envelope = json.loads(seal(TOKEN, "job", {"entry": "train.py"}))
    sealed = bytearray(base64.b64decode(envelope["c"]))
    sealed[3] ^= 1
    envelope["c"] = base64.b64encode(bytes(sealed)).decode()
    with pytest.raises(Unopened):
        unseal(TOKEN, "job", json.dumps(envelope).encode())


def test_an_oversized_value_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(NotOurs) as caught:
        unseal(TOKEN, "job", b"{" * (MAX_VALUE_BYTES + 1))
    assert "bytes" in str(caught.value)


def test_another_secret_or_another_key_is_rejected() -> None:
    raw = seal(TOKEN, "node/1", {"host": "node1"})
    other = JoinToken(TOKEN.address, TOKEN.port, TOKEN.run_id, "another-secret-entirely-0000")
    with pytest.raises(Unopened):
        unseal(other, "node/1", raw)
    with pytest.raises(Unopened):
        unseal(TOKEN, "node/2", raw)  # a value replayed under another key
    other_run = JoinToken(TOKEN.address, TOKEN.port, "ffff00001111", TOKEN.secret)
    with pytest.raises(Unopened):
        unseal(other_run, "node/1", raw)  # ... or in another run with the same secret


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"body": 1, "mac": "x"}',
                                 b'{"v": 2, "n": "AAAA", "c": "AAAA"}', b'{"v": 2, "n": 5}',
                                 b"\xff\xfe", pickle.dumps({"body": "{}", "mac": "x"})])
def test_anything_but_sealed_json_is_rejected(raw: bytes) -> None:
    with pytest.raises(NotOurs) as caught:
        unseal(TOKEN, "job", raw)
    assert not isinstance(caught.value, Unopened)  # junk, not another token's value
    assert TOKEN.run_id not in str(caught.value)
