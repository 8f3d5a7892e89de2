"""The tinker backend against stand-ins for the remote service only, on localhost.

The real code path runs as far as it goes: our preflight, the official SDK's session setup and
client creation, with real sockets. What stands in for Tinker is a closed port, a socket that
accepts and never answers, and a small HTTP server that records what the SDK sent and answers
either with errors (one of which echoes the API key back, as a careless proxy might) or with
just enough of the protocol to open a session.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import tinker

import thinker
from thinker.engine.tinker_backend import TinkerServiceClient
from thinker.errors import BackendError, ConfigError

KEY = "tml-test-secret-0123456789abcdef"
MODEL = "Qwen/Qwen3-4B-Instruct-2507"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class FakeTinker:
    """What the SDK sends, and how to answer: "reject" (401 echoing the key), "fail" (500),
    "serve" (enough protocol to open a session and, after a queueing delay, a sampling
    session) or "vanish" (as "serve", but the service goes dark when asked for a sampling
    session, so that the creation stalls on an unreachable service)."""

    mode: str
    url: str = ""
    requests: list[Request] = field(default_factory=list)
    dark: threading.Event = field(default_factory=threading.Event)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def _handler(fake: FakeTinker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep stderr clean: the tests read it

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            fake.requests.append(Request(self.command, self.path, dict(self.headers.items()), body))
            if fake.dark.is_set():
                self.close_connection = True  # gone: drop the connection without an answer
                return
            status, body = _answer(fake, self.path, self.headers.get("x-api-key", ""))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _answer(fake: FakeTinker, path: str, key: str) -> tuple[int, dict[str, object]]:
    if path.endswith("/healthz"):
        return 200, {"status": "ok"}
    if fake.mode == "reject":
        return 401, {"detail": f"invalid API key {key}"}
    if fake.mode == "fail":
        return 500, {"detail": "internal error"}
    routes: dict[str, tuple[int, dict[str, object]]] = {
        "/api/v1/client/config": (
            200,
            {"pjwt_auth_enabled": False, "use_pyqwest_transport": False},
        ),
        "/api/v1/client/dynamic_config": (404, {"detail": "not found"}),
        "/api/v1/create_session": (200, {"type": "create_session", "session_id": "sess-1"}),
    }
    if path == "/api/v1/create_sampling_session" and fake.mode == "vanish":
        fake.dark.set()  # the service disappears while the client is being created
        return 503, {}
    if path == "/api/v1/create_sampling_session":
        time.sleep(1.5)  # queued for longer than the timeout, while healthz still answers
        return 200, {"type": "create_sampling_session", "sampling_session_id": "samp-1"}
    return routes.get(path, (200, {}))


@pytest.fixture
def fake_tinker(request: pytest.FixtureRequest) -> Iterator[FakeTinker]:
    fake = FakeTinker(mode=request.param)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def black_hole_url() -> Iterator[str]:
    """Accepts TCP connections and never says a word."""
    held: list[socket.socket] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for conn in held:
        conn.close()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "THINKER_TINKER_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)


def _fails(future: thinker.EngineFuture[object]) -> tuple[BackendError, float]:
    start = time.monotonic()
    with pytest.raises(BackendError) as caught:
        future.result(timeout=60)
    return caught.value, time.monotonic() - start


def _assert_no_key(*texts: str) -> None:
    for text in texts:
        assert KEY not in text


def _full_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)) + repr(error)


def test_missing_key_fails_at_construction_with_how_to() -> None:
    for make in (
        lambda: TinkerServiceClient(),
        lambda: thinker.ServiceClient(backend="tinker"),
        lambda: TinkerServiceClient(api_key="  "),
    ):
        with pytest.raises(BackendError) as caught:
            make()
        message = str(caught.value)
        assert "export TINKER_API_KEY=" in message
        assert "api_key=" in message
        assert "thinker.ServiceClient" in message


def test_construction_sends_nothing_and_reads_env(
    monkeypatch: pytest.MonkeyPatch, closed_port_url: str
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    monkeypatch.setenv("TINKER_BASE_URL", closed_port_url + "/")
    monkeypatch.setenv("THINKER_TINKER_TIMEOUT_S", "7.5")
    client = TinkerServiceClient()  # a closed port: anything sent would fail here
    assert (client.base_url, client.timeout_s) == (closed_port_url, 7.5)
    assert repr(client) == f"TinkerServiceClient(base_url={closed_port_url!r}, timeout_s=7.5)"
    assert client._sdk is None
    default = TinkerServiceClient(api_key=KEY, base_url=None, timeout_s=None)
    assert default.timeout_s == 7.5
    monkeypatch.delenv("TINKER_BASE_URL")
    monkeypatch.delenv("THINKER_TINKER_TIMEOUT_S")
    default = TinkerServiceClient(api_key=KEY)
    assert default.base_url.startswith("https://") and default.timeout_s == 30


@pytest.mark.parametrize("timeout", ["0", "-1", "soon", "nan"])
def test_bad_timeout_is_a_config_error(monkeypatch: pytest.MonkeyPatch, timeout: str) -> None:
    monkeypatch.setenv("THINKER_TINKER_TIMEOUT_S", timeout)
    with pytest.raises(ConfigError, match="positive number of seconds"):
        TinkerServiceClient(api_key=KEY)


def test_bad_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http:// or https://"):
        TinkerServiceClient(api_key=KEY, base_url="ftp://example.com")


def test_closed_port_fails_fast(closed_port_url: str) -> None:
    client = TinkerServiceClient(base_url=closed_port_url, api_key=KEY, timeout_s=2)
    error, elapsed = _fails(client.create_lora_training_client(MODEL, rank=8))
    assert elapsed < 2.5
    message = str(error)
    assert message.startswith(f"Tinker service at {closed_port_url} is not reachable within 2 s (")
    assert "ConnectError" in message
    assert "Check TINKER_BASE_URL" in message and "THINKER_TINKER_TIMEOUT_S" in message


def test_black_hole_fails_within_the_bound(black_hole_url: str) -> None:
    client = TinkerServiceClient(base_url=black_hole_url, api_key=KEY, timeout_s=2)
    error, elapsed = _fails(client.create_sampling_client(base_model=MODEL))
    assert 1.9 < elapsed < 5
    assert "not reachable within 2 s (no answer within 2 s" in str(error)


@pytest.mark.parametrize("fake_tinker", ["reject"], indirect=True)
def test_sdk_really_sends_and_the_key_never_leaks(
    fake_tinker: FakeTinker,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    service = thinker.ServiceClient(
        backend="tinker", base_url=fake_tinker.url, api_key=KEY, timeout_s=2
    )
    assert fake_tinker.requests == []  # construction sends nothing

    error, elapsed = _fails(service.create_lora_training_client(MODEL, rank=8))

    assert elapsed < 5
    assert fake_tinker.paths()[:2] == ["/api/v1/healthz", "/api/v1/client/config"]
    preflight, sdk_call = fake_tinker.requests[:2]
    assert "x-api-key" not in {h.lower() for h in preflight.headers}  # the probe sends no key
    assert sdk_call.method == "POST" and sdk_call.headers["X-API-Key"] == KEY
    message = str(error)
    # The server echoed the key back into the SDK's error; it is scrubbed out of ours.
    assert "AuthenticationError" in message and "invalid API key ***" in message
    assert error.__cause__ is None and error.__suppress_context__ is False
    assert error.__context__ is None
    out, err = capsys.readouterr()
    _assert_no_key(_full_text(error), repr(service), repr(service._impl), caplog.text, out, err)


@pytest.mark.parametrize("fake_tinker", ["fail"], indirect=True)
def test_stalled_session_setup_fails_within_the_bound(fake_tinker: FakeTinker) -> None:
    """The service answers HTTP, so the probe passes, but every SDK call gets a 500, which
    the SDK retries for about 300 s; the wait on the SDK call cuts that short."""
    client = TinkerServiceClient(base_url=fake_tinker.url, api_key=KEY, timeout_s=2)
    first_sdk = client._sdk_client()
    error, elapsed = _fails(client.create_training_client_from_state("tinker://run/weights/x"))
    assert 1.9 < elapsed < 5
    assert "not reachable within 2 s (it answers HTTP, but the SDK's session setup" in str(error)
    assert fake_tinker.paths().count("/api/v1/client/config") >= 2  # the SDK was retrying
    assert client._sdk is None and client._sdk_client() is not first_sdk  # retried afresh


@pytest.mark.parametrize("fake_tinker", ["serve"], indirect=True)
def test_reachable_service_gives_the_sdk_client_even_when_slow(
    fake_tinker: FakeTinker, caplog: pytest.LogCaptureFixture
) -> None:
    """Creation takes longer than the timeout, but the service keeps answering: a queue, not
    an outage, so the wait goes on and the future gives the SDK's own SamplingClient."""
    caplog.set_level(logging.INFO, logger="thinker")
    client = TinkerServiceClient(base_url=fake_tinker.url, api_key=KEY, timeout_s=1)
    sampler = client.create_sampling_client(base_model=MODEL).result(timeout=10)
    assert type(sampler) is tinker.SamplingClient
    assert "Still waiting for Tinker to create a sampling client" in caplog.text
    assert fake_tinker.paths().count("/api/v1/healthz") == 2  # preflight, then one re-probe
    client.close()
    assert "/api/v1/sessions/sess-1/finish" in fake_tinker.paths()
    assert client._sdk is None


@pytest.mark.parametrize("fake_tinker", ["vanish"], indirect=True)
def test_service_lost_during_creation_fails_within_the_bound(
    fake_tinker: FakeTinker, caplog: pytest.LogCaptureFixture
) -> None:
    """A session opens for real, then the service drops every connection while the sampling
    client is being created: the SDK would keep retrying; the re-probe ends the wait."""
    caplog.set_level(logging.DEBUG)
    service = thinker.ServiceClient(
        backend="tinker", base_url=fake_tinker.url, api_key=KEY, timeout_s=1
    )
    error, elapsed = _fails(service.create_sampling_client(base_model=MODEL))
    assert elapsed < 4
    paths = fake_tinker.paths()
    assert "/api/v1/create_session" in paths and "/api/v1/create_sampling_session" in paths
    assert str(error).startswith(f"Tinker service at {fake_tinker.url} is not reachable within 1 s")
    assert isinstance(service._impl._sdk, tinker.ServiceClient)
    _assert_no_key(_full_text(error), caplog.text)
    # The session is kept for when the service is back; closed then, it is finished (and its
    # heartbeat, which would warn every 10 s for the rest of the process, stops).
    fake_tinker.dark.clear()
    service.close("interrupted", "the test is over")
    finish = [r for r in fake_tinker.requests if r.path == "/api/v1/sessions/sess-1/finish"]
    assert finish and json.loads(finish[-1].body)["reason"] == {"type": "interrupted"}
    assert service._impl._sdk is None


def test_facade_env_black_hole(monkeypatch: pytest.MonkeyPatch, black_hole_url: str) -> None:
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    monkeypatch.setenv("TINKER_BASE_URL", black_hole_url)
    monkeypatch.setenv("THINKER_TINKER_TIMEOUT_S", "1")
    service = thinker.ServiceClient(backend="tinker")
    error, elapsed = _fails(
        service.create_training_client_from_state_with_optimizer("tinker://r/w")
    )
    assert 0.9 < elapsed < 3
    assert f"Tinker service at {black_hole_url} is not reachable within 1 s" in str(error)


@pytest.mark.parametrize("fake_tinker", ["serve"], indirect=True)
def test_the_sdks_own_arguments_reach_the_sdk(fake_tinker: FakeTinker) -> None:
    """`thinker.ServiceClient` takes `tinker.ServiceClient`'s arguments and hands them to the
    SDK: the session the SDK opens carries the user metadata; the creation future also serves,
    deprecated, as the client, as the SDK's does."""
    service = thinker.ServiceClient(
        {"team": "thinker-tests"},
        backend="tinker",
        base_url=fake_tinker.url,
        api_key=KEY,
        timeout_s=5,
    )
    future = service.create_sampling_client(base_model=MODEL)
    with pytest.warns(FutureWarning, match="deprecated"):
        assert future.get_base_model() == MODEL
    (session,) = [r for r in fake_tinker.requests if r.path == "/api/v1/create_session"]
    assert json.loads(session.body)["user_metadata"] == {"team": "thinker-tests"}
    service._impl.close()  # type: ignore[attr-defined]
