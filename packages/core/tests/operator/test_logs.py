"""The retry-noise filter: what an operator log keeps of a failing request (issue 16)."""

from __future__ import annotations

import logging

import pytest

from llmaz.operator.kube import KubeError
from llmaz.operator.logs import LOG_FORMAT, MAX_LOG_MESSAGE, RetryNoise, install

WATCH = "GET https://127.0.0.1:6443/apis/inference.llmaz.io/v1alpha1/playgrounds?watch=true"


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_kopf_retries_are_one_line_per_failing_request_plus_the_escalation() -> None:
    keep = RetryNoise().filter
    first = f"Request attempt #1/9 failed; will retry: {WATCH} -> ServerDisconnectedError()"
    assert keep(record("kopf._cogs.clients.watching", logging.ERROR, first))
    for n in range(2, 9):
        again = f"Request attempt #{n}/9 failed; will retry: {WATCH} -> ServerDisconnectedError()"
        assert not keep(record("kopf._cogs.clients.watching", logging.ERROR, again))
    last = f"Request attempt #9/9 failed; escalating: {WATCH} -> ServerDisconnectedError()"
    assert keep(record("kopf._cogs.clients.watching", logging.ERROR, last))


def test_urllib3_retry_warnings_go_and_everything_else_stays() -> None:
    keep = RetryNoise().filter
    retry = "Retrying (Retry(total=2, connect=None)) after connection broken by 'RemoteDisconnected()'"
    assert not keep(record("urllib3.connectionpool", logging.WARNING, retry))
    assert keep(record("urllib3.connectionpool", logging.WARNING, "Connection pool is full"))
    ours = "reconcile of Playground ns/a failed (retry in 1s): PATCH ...: Connection refused"
    assert keep(record("llmaz.operator", logging.WARNING, ours))
    assert keep(record("kopf.objects", logging.ERROR, "Handler 'x' failed with an exception."))


def test_install_filters_every_root_handler() -> None:
    root = logging.Logger("test-root")
    handler = logging.StreamHandler()
    root.addHandler(handler)
    install(root)
    assert any(isinstance(f, RetryNoise) for f in handler.filters)


REFUSED = (
    "Request attempt #1/9 failed; will retry: GET https://127.0.0.1:46869/api/v1/pods?watch=true"
    "&allowWatchBookmarks=true&labelSelector=llmaz.io%2Fmodel-name%2Cleaderworkerset.sigs.k8s.io%2Fname"
    "&resourceVersion=428&timeoutSeconds=300 -> ClientConnectorError(ConnectionKey(host='127.0.0.1', "
    "port=46869, is_ssl=True, ssl=True, proxy=None, proxy_auth=None, proxy_headers_hash=None, "
    "server_hostname=None), ConnectionResetError(104, 'Connection reset by peer'))"
)
"""A line kopf logged in the watch-410 scenario (510 characters)."""


def test_kept_kopf_lines_are_short_and_still_say_what_failed() -> None:
    rec = record("kopf._cogs.clients.watching", logging.ERROR, REFUSED)
    assert RetryNoise().filter(rec)
    assert rec.getMessage() == (
        "Request attempt #1/9 failed; will retry: GET /api/v1/pods (watch)"
        " -> ConnectionResetError: Connection reset by peer"
    )
    last = f"Request attempt #9/9 failed; escalating: {WATCH} -> ServerDisconnectedError()"
    rec = record("kopf._cogs.clients.watching", logging.ERROR, last)
    assert RetryNoise().filter(rec)
    assert rec.getMessage() == (
        "Request attempt #9/9 failed; escalating: GET /apis/inference.llmaz.io/v1alpha1/playgrounds"
        " (watch) -> ServerDisconnectedError()"
    )


def test_an_unknown_long_error_is_cut_and_other_kopf_lines_are_untouched() -> None:
    long = f"Request attempt #1/9 failed; will retry: {WATCH} -> Weird({'x' * 500})"
    rec = record("kopf._cogs.clients.watching", logging.ERROR, long)
    assert RetryNoise().filter(rec)
    assert len(rec.getMessage()) < 250
    assert rec.getMessage().endswith("...")
    other = "Handler 'x' failed with an exception. Will retry."
    rec = record("kopf.objects", logging.ERROR, other)
    assert RetryNoise().filter(rec)
    assert rec.getMessage() == other


KEY = (
    "ConnectionKey(host='127.0.0.1', port=38005, is_ssl=True, ssl=True, proxy=None, proxy_auth=None, "
    "proxy_headers_hash=None)"
)
"""aiohttp's connection key, as its connection errors' repr carries it."""


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        # a refused connection: the inner error's text is quoted with double quotes
        (
            f"ClientConnectorError({KEY}, "
            "ConnectionRefusedError(111, \"Connect call failed ('127.0.0.1', 1)\"))",
            "ConnectionRefusedError: Connect call failed ('127.0.0.1', 1)",
        ),
        # no inner text to pick: the key is dropped, the rest kept
        (
            f"ClientConnectorError({KEY}, ServerDisconnectedError())",
            "ClientConnectorError(ServerDisconnectedError())",
        ),
    ],
)
def test_aiohttp_connection_errors_are_shortened(error: str, shown: str) -> None:
    rec = record(
        "kopf._cogs.clients.watching",
        logging.ERROR,
        f"Request attempt #1/9 failed; will retry: {WATCH} -> {error}",
    )
    assert RetryNoise().filter(rec)
    assert rec.getMessage().endswith(f"(watch) -> {shown}")


RBAC_403 = (
    '{"kind":"Status","message":"backends.gateway.envoyproxy.io is forbidden: User '
    '\\"system:serviceaccount:llmaz-system:llmaz-operator-reliability\\" cannot list resource '
    '\\"backends\\" in API group \\"gateway.envoyproxy.io\\" in the namespace \\"NS\\": RBAC: '
    '[clusterrole.rbac.authorization.k8s.io \\"llmaz-operator\\" not found, clusterrole.rbac.'
    'authorization.k8s.io \\"system:basic-user\\" not found, clusterrole.rbac.authorization.k8s.io '
    '\\"system:discovery\\" not found]","code":403}'
)
"""What a just-restarted API server answered while its RBAC caches were empty (fault suite)."""


def test_a_line_quoting_a_long_api_server_message_stays_under_500_characters() -> None:
    """Issue 16's bound, hit by the API-server-restart fault: a 403 for a list in a namespace with a
    63-character name, logged by the integrations pass, was 506 characters with every quoted piece
    already trimmed; the whole message is now cut, wherever it comes from."""
    namespace = "t1-" + "x" * 60
    path = f"/apis/gateway.envoyproxy.io/v1alpha1/namespaces/{namespace}/backends"
    err = KubeError("GET", path, 403, RBAC_403.replace("NS", namespace))
    rec = logging.LogRecord(
        "llmaz.operator.integrations",
        logging.WARNING,
        __file__,
        1,
        "integrations of namespace %s failed (retry in %.0fs): %s",
        (namespace, 4.0, err.brief),
        None,
    )
    assert RetryNoise().filter(rec)
    line = logging.Formatter(LOG_FORMAT).format(rec)
    assert len(line) <= 500, len(line)
    assert line.endswith("...")
    assert f"integrations of namespace {namespace} failed (retry in 4s): GET backends" in line
    short = record("llmaz.operator", logging.INFO, "created Service ns/a for Playground a")
    assert RetryNoise().filter(short)
    assert short.getMessage() == "created Service ns/a for Playground a"
    exact = record("llmaz.operator", logging.INFO, "y" * MAX_LOG_MESSAGE)
    assert RetryNoise().filter(exact)
    assert exact.getMessage() == "y" * MAX_LOG_MESSAGE
