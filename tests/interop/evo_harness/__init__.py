"""The harness of evo's interop suite (tests/interop): everything the tests share, and the one
place that starts processes (evod above all), makes certificates and hands out ports. Tests import
from here, never from one another; conftest.py holds the fixtures and the end-of-run check that
no process of the run is left.

- processes: binaries, temp dirs, ports, waiting, `spawn`/`stop` and the leftover check;
- servers: server-everything (HTTP, SSE), redis-server, an OAuth issuer's JWKS, certificates;
- daemon: `Evo`, one evod (any config, env, --mode, serve.http), and the shared configs;
- clients: the SDK's clients on the shim or the HTTP endpoint, and readers of their results.
"""

from evo_harness.clients import NATIVE_TOOLS, ListChanged, dynamic, http_client, names, text, unwrapped
from evo_harness.daemon import (
    READY_TIMEOUT_S,
    SERVER_IDS,
    Evo,
    evo_with,
    http_evo_fixture,
    shared_config,
    start_http_evo,
)
from evo_harness.processes import (
    FILESYSTEM_JS,
    HERE,
    LoggedProcess,
    clean_env,
    everything_js,
    evoctl_bin,
    evod_bin,
    fixture_bin,
    free_port,
    make_tmp,
    node_bin,
    spawn,
    stop,
    tail,
    wait_for,
)
from evo_harness.servers import HttpEverything, Issuer, Redis, SseEverything, certificate, write_certificate

__all__ = [
    "FILESYSTEM_JS",
    "HERE",
    "NATIVE_TOOLS",
    "READY_TIMEOUT_S",
    "SERVER_IDS",
    "Evo",
    "HttpEverything",
    "Issuer",
    "ListChanged",
    "LoggedProcess",
    "Redis",
    "SseEverything",
    "certificate",
    "clean_env",
    "dynamic",
    "everything_js",
    "evoctl_bin",
    "evod_bin",
    "fixture_bin",
    "free_port",
    "http_client",
    "evo_with",
    "http_evo_fixture",
    "make_tmp",
    "names",
    "node_bin",
    "shared_config",
    "spawn",
    "start_http_evo",
    "stop",
    "tail",
    "text",
    "unwrapped",
    "wait_for",
    "write_certificate",
]
