"""The wire side of the HTTP peers bench (`bench/http_peers.py`): the MCP server every gateway
fronts (`Tools`, as a stdio child or as the direct Streamable HTTP reference), and the one raw
keep-alive HTTP/1.1 client (`Client`, Streamable HTTP or the legacy HTTP+SSE transport) that
checks every answer. Standard library only."""

from __future__ import annotations

import http.client
import json
import random
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROTOCOL = "2025-06-18"
KNOWN_PROTOCOLS = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
TOOLS = [
    {
        "name": "add",
        "description": "Adds two integers and returns their sum.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
    },
    {
        "name": "echo",
        "description": "Returns its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
]


# ---------------------------------------------------------------- the tools (child and direct server)


class Tools:
    """The MCP server both the stdio child and the direct HTTP server are: one message in, its
    answer out (None for a notification). `lie_every` N > 0 answers every N-th `add` with a wrong
    sum (the self-test's proof that wrong answers are counted)."""

    def __init__(self, lie_every: int = 0) -> None:
        self.lie_every = lie_every
        self.adds = 0
        self.lock = threading.Lock()

    def answer(self, msg: Any) -> dict[str, Any] | None:
        if not isinstance(msg, dict) or "id" not in msg:
            return None
        mid, method, params = msg["id"], msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": asked if asked in KNOWN_PROTOCOLS else PROTOCOL,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "peers-bench", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "ping":
            result = {}
        elif method == "tools/call":
            try:
                result = self.call(params.get("name"), params.get("arguments") or {})
            except (TypeError, ValueError, KeyError) as e:
                result = {"content": [{"type": "text", "text": f"bad arguments: {e}"}], "isError": True}
        else:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}}
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def call(self, name: Any, args: dict[str, Any]) -> dict[str, Any]:
        if name == "add":
            total = int(args["a"]) + int(args["b"])
            with self.lock:
                self.adds += 1
                if self.lie_every and self.adds % self.lie_every == 0:
                    total += 1
            return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}
        if name == "echo":
            return {"content": [{"type": "text", "text": str(args["text"])}]}
        return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}


def serve_stdio(lie_every: int) -> None:
    tools = Tools(lie_every)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        reply = tools.answer(msg)
        if reply is not None:
            out.write(json.dumps(reply).encode() + b"\n")
            out.flush()


class DirectHandler(BaseHTTPRequestHandler):
    """The direct reference: Streamable HTTP on /mcp, JSON responses, keep-alive."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    tools = Tools()
    sessions: set[str] = set()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            msg = json.loads(body)
        except ValueError:
            self.reply(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}')
            return
        headers = {"Content-Type": "application/json"}
        if isinstance(msg, dict) and msg.get("method") == "initialize":
            sid = uuid.uuid4().hex
            self.sessions.add(sid)
            headers["Mcp-Session-Id"] = sid
        elif self.headers.get("Mcp-Session-Id") not in self.sessions:
            self.reply(404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"no such session"}}')
            return
        answer = self.tools.answer(msg)
        if answer is None:
            self.reply(202)
        else:
            self.reply(200, json.dumps(answer).encode(), headers)

    def do_DELETE(self) -> None:
        self.sessions.discard(self.headers.get("Mcp-Session-Id", ""))
        self.reply(200)

    def do_GET(self) -> None:
        self.reply(405, headers={"Allow": "POST, DELETE"})


def serve_http(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), DirectHandler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------- the client


class CallFailed(Exception):
    """A call that got no usable answer (HTTP error, timeout, malformed or missing message)."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how a client reaches one gateway: `kind` is `streamable` (Streamable HTTP) or
    `sse` (the legacy HTTP+SSE transport: GET `url` for the stream, POST to the endpoint it
    names); `tool` is the gateway's name for the child's `add`."""

    url: str
    kind: str = "streamable"
    token: str | None = None
    tool: str = "add"


def read_sse_events(resp: http.client.HTTPResponse) -> Any:
    """(event, data) pairs from an event stream, as they arrive."""
    event, data = "message", []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                yield event, b"\n".join(data)
            event, data = "message", []
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode()


class Client:
    """One MCP client on keep-alive connections: initialize, notifications/initialized, then
    requests; a JSON or an event-stream answer (Streamable HTTP), or answers on the GET stream
    (HTTP+SSE)."""

    def __init__(self, endpoint: Endpoint, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        u = urllib.parse.urlsplit(endpoint.url)
        self.host, self.port, self.path = u.hostname or "127.0.0.1", u.port or 80, u.path or "/"
        self.timeout = timeout
        self.conn = self.connect()
        self.session: str | None = None
        self.next_id = 1
        self.stream: http.client.HTTPResponse | None = None
        self.events: Any = None
        self.stream_conn: http.client.HTTPConnection | None = None
        self.post_path = self.path

    def reset(self) -> None:
        """A new connection for the requests after a failed one, whose answer may still come."""
        self.conn.close()
        self.conn = self.connect()

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.endpoint.token:
            h["Authorization"] = f"Bearer {self.endpoint.token}"
        if self.session:
            h["Mcp-Session-Id"] = self.session
            h["MCP-Protocol-Version"] = PROTOCOL
        return h

    def open(self) -> Client:
        if self.endpoint.kind == "sse":
            self.stream_conn = self.connect()
            h = {"Accept": "text/event-stream"} | ({"Authorization": f"Bearer {self.endpoint.token}"} if self.endpoint.token else {})
            self.stream_conn.request("GET", self.path, headers=h)
            self.stream = self.stream_conn.getresponse()
            if self.stream.status != 200:
                raise CallFailed(f"GET {self.path}: HTTP {self.stream.status} {self.stream.read(300)!r}")
            self.events = read_sse_events(self.stream)
            for event, data in self.events:
                if event == "endpoint":
                    self.post_path = urllib.parse.urljoin(self.path, data.decode())
                    break
            else:
                raise CallFailed("the event stream ended before naming its endpoint")
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "evo-peers-bench", "version": "1"}}
        self.request("initialize", params)
        self.notify("notifications/initialized")
        return self

    def send(self, msg: dict[str, Any]) -> http.client.HTTPResponse:
        body = json.dumps(msg).encode()
        for attempt in (1, 2):
            try:
                self.conn.request("POST", self.post_path, body=body, headers=self.headers())
                return self.conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server closed a kept-alive connection between requests: the request was
                # not read, so it is sent again on a new one.
                self.conn.close()
                self.conn = self.connect()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def notify(self, method: str) -> None:
        resp = self.send({"jsonrpc": "2.0", "method": method})
        resp.read()
        if resp.status >= 300:
            raise CallFailed(f"{method}: HTTP {resp.status}")

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        mid = self.next_id
        self.next_id += 1
        resp = self.send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
        if method == "initialize" and resp.getheader("Mcp-Session-Id"):
            self.session = resp.getheader("Mcp-Session-Id")
        ctype = resp.getheader("Content-Type") or ""
        if resp.status >= 300:
            raise CallFailed(f"{method}: HTTP {resp.status} {resp.read(300)!r}")
        if self.endpoint.kind == "sse":
            resp.read()
            assert self.events is not None
            answer = self.answer_from(self.events, mid)
        elif ctype.startswith("text/event-stream"):
            answer = self.answer_from(read_sse_events(resp), mid)
            resp.read()  # the rest of the stream, so that the connection can be used again
        else:
            try:
                answer = json.loads(resp.read())
            except ValueError as e:
                raise CallFailed(f"{method}: not JSON: {e}") from e
        if resp.will_close:
            self.conn.close()
            self.conn = self.connect()
        if "error" in answer:
            raise CallFailed(f"{method}: error {answer['error']}")
        return answer.get("result") or {}

    @staticmethod
    def answer_from(events: Any, mid: int) -> dict[str, Any]:
        for _event, data in events:
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            if isinstance(msg, dict) and "method" not in msg:
                if isinstance(msg.get("id"), int) and msg["id"] < mid:
                    continue  # the late answer to a request that failed here (timed out)
                if msg.get("id") != mid:
                    raise CallFailed(f"answer to id {msg.get('id')!r} where {mid} was asked")
                return msg
        raise CallFailed(f"the stream ended without an answer to id {mid}")

    def add(self, a: int, b: int) -> str | None:
        """One `add` call: None when its answer carries a+b (text, and structuredContent when
        present), else what it carried; CallFailed when there is no answer."""
        result = self.request("tools/call", {"name": self.endpoint.tool, "arguments": {"a": a, "b": b}})
        texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
        structured = result.get("structuredContent")
        if not result.get("isError") and texts[:1] == [str(a + b)] and structured in (None, {"sum": a + b}):
            return None
        return json.dumps(result)

    def tool_names(self) -> list[str]:
        return [t.get("name", "") for t in self.request("tools/list", {}).get("tools", [])]

    def close(self) -> None:
        try:
            if self.session and self.endpoint.kind == "streamable":
                self.conn.request("DELETE", self.path, headers=self.headers())
                self.conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        for c in (self.conn, self.stream_conn):
            if c is not None:
                c.close()


@dataclass
class Tally:
    """Calls and what their answers were."""

    ok: int = 0
    wrong: int = 0
    failed: int = 0
    first_wrong: str = ""
    first_failure: str = ""
    latencies_us: list[float] = field(default_factory=list)
    # The sums asked for, and the sums wrong answers carried: a wrong sum that another client
    # asked for is an answer delivered to the wrong caller.
    asked: set[int] = field(default_factory=set)
    answered_wrong: list[int] = field(default_factory=list)

    def merge(self, other: Tally) -> None:
        self.ok += other.ok
        self.wrong += other.wrong
        self.failed += other.failed
        self.first_wrong = self.first_wrong or other.first_wrong
        self.first_failure = self.first_failure or other.first_failure
        self.latencies_us += other.latencies_us
        self.asked |= other.asked
        self.answered_wrong += other.answered_wrong

    def crossed(self) -> int:
        """Wrong answers whose sum is one this run asked for (another call's answer)."""
        return sum(1 for s in self.answered_wrong if s in self.asked)


def checked_calls(client: Client, tally: Tally, count: int | None = None, until: float | None = None) -> None:
    """`count` calls, or calls until the monotonic time `until`, each with fresh arguments."""
    done = 0
    while (count is None or done < count) and (until is None or time.monotonic() < until):
        a, b = random.randrange(1, 1 << 40), random.randrange(1, 1 << 40)
        tally.asked.add(a + b)
        start = time.perf_counter()
        try:
            wrong = client.add(a, b)
        except (CallFailed, OSError, http.client.HTTPException) as e:
            tally.failed += 1
            tally.first_failure = tally.first_failure or f"{type(e).__name__}: {e}"[:300]
            if tally.failed > 20:
                return
            client.reset()
            continue
        finally:
            done += 1
        if wrong is None:
            tally.ok += 1
            tally.latencies_us.append((time.perf_counter() - start) * 1e6)
        else:
            tally.wrong += 1
            tally.first_wrong = tally.first_wrong or f"add({a}, {b}) = {a + b} answered {wrong[:160]}"
            try:
                tally.answered_wrong.append(int(json.loads(wrong)["content"][0]["text"]))
            except (ValueError, KeyError, IndexError, TypeError):
                pass


def load_worker(endpoint: Endpoint, ready: Any, go: Any, deadline: Any, results: Any) -> None:
    """One of the concurrent clients (its own process): opens its session, waits for the start,
    calls until the deadline, and reports its tally."""
    tally = Tally()
    client = None
    try:
        client = Client(endpoint).open()
    except (CallFailed, OSError, http.client.HTTPException) as e:
        tally.failed += 1
        tally.first_failure = f"open: {type(e).__name__}: {e}"[:300]
    ready.release()
    go.wait()
    if client is not None:
        checked_calls(client, tally, until=deadline.value)
        client.close()
    tally.latencies_us = []
    results.put(tally)
