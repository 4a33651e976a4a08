"""Fixtures: the real ratelimitd binary (``RATELIMITD_BIN``, else the cargo-built one of this
repository) on 127.0.0.1 ephemeral ports with the test-only manual clock, and misbehaving peers
(nothing listening, a peer that never answers)."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

#: The manual clock's start, Unix seconds: the start of a minute, so windows are whole.
T0 = 1_800_000_000

REPO = Path(__file__).resolve().parents[3]


def binary() -> str:
    explicit = os.environ.get("RATELIMITD_BIN")
    if explicit:
        return explicit
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "ratelimitd"
    if not path.exists():
        pytest.fail(
            f"no ratelimitd binary at {path}: run `cargo build --bin ratelimitd` or set RATELIMITD_BIN"
        )
    return str(path)


class Ratelimitd:
    """A running ratelimitd with one configuration file."""

    def __init__(self, yaml: str) -> None:
        self._dir = tempfile.TemporaryDirectory()
        Path(self._dir.name, "config.yaml").write_text(yaml)
        env = dict(os.environ)
        env.update(
            LOG_LEVEL="info",
            LOG_FORMAT="json",
            USE_STATSD="false",
            POLICY_ENABLED="false",
            RATELIMITD_CONFIG=self._dir.name,
            RATELIMITD_TEST_MANUAL_CLOCK=str(T0),
        )
        # Every listener (HTTP, gRPC, debug, admin) on 127.0.0.1, on a port the system picks.
        for listener in ("", "GRPC_", "DEBUG_", "ADMIN_"):
            env[listener + "HOST"] = "127.0.0.1"
            env[listener + "PORT"] = "0"
        self.proc = subprocess.Popen([binary()], env=env, stderr=subprocess.PIPE, text=True)
        lines: "queue.Queue[str]" = queue.Queue()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                lines.put(line)

        threading.Thread(target=drain, daemon=True).start()
        seen: List[str] = []
        while True:
            try:
                line = lines.get(timeout=30)
            except queue.Empty:
                self.stop()
                raise RuntimeError("ratelimitd did not report its addresses:\n" + "".join(seen))
            if "ratelimitd listening" in line:
                log = json.loads(line)
                self.url = f"http://{log['http_addr']}"
                self._debug = f"http://{log['debug_addr']}"
                return
            seen.append(line)

    def _clock(self, query: str) -> None:
        with urllib.request.urlopen(f"{self._debug}/test/clock?{query}", timeout=5) as r:
            assert r.status == 200

    def set_time(self, secs: int) -> None:
        """Sets the manual clock to ``secs`` after the epoch."""
        self._clock(f"set={secs}")

    def advance(self, seconds: float) -> None:
        """Moves the manual clock forward by ``seconds``, rounded down to whole milliseconds."""
        self._clock(f"advance_ms={int(seconds * 1000)}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self._dir.cleanup()


@pytest.fixture
def ratelimitd() -> Iterator[Callable[[str], Ratelimitd]]:
    """Starts ratelimitd with a YAML configuration; stopped after the test."""
    started: List[Ratelimitd] = []

    def start(yaml: str) -> Ratelimitd:
        server = Ratelimitd(yaml)
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def unreachable() -> str:
    """A URL where nothing listens (a port just released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def silent() -> Iterator[str]:
    """A URL whose peer accepts connections and never answers (until the test ends)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set() and len(held) < 64:
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    t.join(timeout=5)
    for s in held:
        s.close()
    listener.close()


def clients_config(name: str) -> str:
    """A configuration from ``clients/testdata/``, which the Rust client's tests read too."""
    return (Path(__file__).resolve().parents[2] / "testdata" / name).read_text()


#: The configuration both clients' tests run ratelimitd with (see the file's header).
CONFIG = clients_config("api.yaml")
