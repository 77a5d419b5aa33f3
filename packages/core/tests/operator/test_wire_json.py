"""The operator's JSON on the wire (:func:`llmaz.operator.kube.encode` / ``decode``, orjson): what it
sends and reads back is what the standard library would have, including the values orjson handles
differently or refuses."""

from __future__ import annotations

import json

import pytest

from llmaz.operator.kube import Kube, decode, encode


def test_a_rendered_child_round_trips_unchanged_with_non_ascii_text() -> None:
    child = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "qwen-lb", "annotations": {"note": "modèle für 日本語 ✓"}},
        "spec": {"ports": [{"port": 8080, "targetPort": 8080}], "weight": 0.25, "headless": None, "ok": True},
    }
    sent = encode(child)
    assert json.loads(sent) == child
    assert decode(sent) == child
    assert decode(sent.decode()) == child  # text as well as bytes


def test_an_integer_orjson_refuses_is_still_encoded() -> None:
    body = {"spec": {"huge": 2**70, "small": -(2**63)}}
    assert json.loads(encode(body)) == body


def test_what_json_cannot_encode_either_is_an_error_not_a_silent_body() -> None:
    with pytest.raises(TypeError):
        encode({"when": object()})


def test_an_integer_beyond_64_bits_reads_as_the_float_the_api_server_keeps() -> None:
    assert decode(b'{"n": 18446744073709551616}') == {"n": 18446744073709551616.0}
    assert decode(b'{"n": 9223372036854775807}') == {"n": 2**63 - 1}


def test_a_bad_answer_raises_what_json_raised() -> None:
    """The watch retries on ``ValueError`` and callers that caught ``json.JSONDecodeError`` still do."""
    with pytest.raises(json.JSONDecodeError):
        decode(b"<html>502 Bad Gateway</html>")


def test_request_bodies_are_json_bytes_and_raw_bodies_pass_through() -> None:
    assert Kube._payload({"a": 1}) == b'{"a":1}'
    assert Kube._payload("apiVersion: v1\n") == "apiVersion: v1\n"
    assert Kube._payload(b"{}") == b"{}"
    assert Kube._payload(None) is None
