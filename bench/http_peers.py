#!/usr/bin/env python3
"""evo's Streamable HTTP endpoint against other MCP gateways ("peers"), in one interleaved run.

Every gateway fronts the same stdio MCP child (this file with `--serve-stdio`: the tools `add` and
`echo`, stdlib only), and one raw keep-alive HTTP/1.1 client (`http.client`) calls `add` through
each, with fresh random arguments every call; every answer's sum (text and structuredContent) and
JSON-RPC id are checked, so a gateway that mixes answers up is reported, not timed. The direct
reference is this file with `--serve-http`: the same tools as a minimal Streamable HTTP server
(JSON responses, keep-alive). Measured, in rounds that alternate between the gateways and the
direct server so that noise hits all of them:

* the added median latency of sequential calls against the direct server;
* with `--clients` concurrent client processes: calls/s, and the gateway's own CPU per call
  (utime+stime from /proc of the gateway process and its descendants, minus the stdio children
  and their descendants, which every gateway runs alike);
* the gateway's RSS (the same process tree minus the children) after the sequential calls and
  at the end, and its growth with 100 idle sessions (initialized, connections kept open).

The child, the direct server and the client are in `peers/wire.py`; installing, starting and
finding the gateways' processes in `peers/gateways.py`.

The peers are installed, pinned, into `bench/.peers/` (ignored by git) with npm and pip; a peer
that cannot be installed or started is a row "skipped: <reason>". Needs Python 3.11+, Node 20 with
npm, and the registries (npm, PyPI) reachable; evod comes from `--evod` (build it with `cargo build
--release -p evo-daemon -p evo-ctl`). `--self-test` installs nothing: the direct server and evod
(no auth) for 50 calls each, with a child that lies on every 10th call, which must be counted.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from peers.gateways import (
    CHILD_FLAG,
    Gateway,
    Skip,
    cpu_ticks,
    find_add,
    rss_kib,
    run,
    short,
    start_contextforge,
    start_direct,
    start_evo,
    start_mcp_hub,
    start_mcp_proxy,
    start_supergateway,
)
from peers.wire import CallFailed, Client, Tally, checked_calls, load_worker, serve_http, serve_stdio

REPO = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- measuring


def sequential(gateways: list[Gateway], calls: int, rounds: int) -> None:
    """`calls` sequential calls per gateway on one client each, in `rounds` rounds whose order
    rotates, so a noisy moment hits every gateway."""
    clients: dict[str, Client] = {}
    for gw in gateways:
        assert gw.endpoint is not None
        try:
            clients[gw.name] = Client(gw.endpoint).open()
        except (CallFailed, OSError, http.client.HTTPException) as e:
            gw.seq.failed += 1
            gw.seq.first_failure = f"open: {type(e).__name__}: {e}"[:300]
    per_round = max(1, calls // rounds)
    for r in range(rounds):
        print(f"  sequential round {r + 1} of {rounds}", file=sys.stderr, flush=True)
        for gw in gateways[r % len(gateways) :] + gateways[: r % len(gateways)]:
            if gw.name in clients and gw.seq.failed <= 20:
                checked_calls(clients[gw.name], gw.seq, count=per_round)
    for client in clients.values():
        client.close()


def concurrent(gw: Gateway, clients: int, seconds: float) -> None:
    """`clients` client processes calling for `seconds`; the gateway's CPU over that time."""
    assert gw.endpoint is not None and gw.proc is not None
    ctx = multiprocessing.get_context("fork")
    ready, go, deadline, results = ctx.Semaphore(0), ctx.Event(), ctx.Value("d", 0.0), ctx.Queue()
    workers = [ctx.Process(target=load_worker, args=(gw.endpoint, ready, go, deadline, results), daemon=True) for _ in range(clients)]
    for w in workers:
        w.start()
    for _ in workers:
        ready.acquire(timeout=120)
    before = cpu_ticks(gw.own()[0])
    start = time.monotonic()
    deadline.value = start + seconds
    go.set()
    time.sleep(seconds)
    after = cpu_ticks(gw.own()[0])
    gw.load_seconds += time.monotonic() - start
    gw.cpu_ticks += sum(t - before.get(pid, 0) for pid, t in after.items())
    for _ in workers:
        gw.load.merge(results.get(timeout=120))
    for w in workers:
        w.join(timeout=30)
        if w.is_alive():
            w.kill()


def idle_sessions(gw: Gateway, count: int = 100) -> None:
    """The gateway's RSS growth with `count` more sessions, initialized and kept open."""
    assert gw.endpoint is not None and gw.proc is not None
    time.sleep(2.0)  # settle (a collector's work, sockets closing)
    own, children = gw.own()
    before, opened = rss_kib(own), []
    try:
        for i in range(count):
            opened.append(Client(gw.endpoint, timeout=60).open())
            if i == 4:
                more = gw.own()[1] - children
                if more >= 5:
                    gw.idle_growth = f"spawns a child per session (+{more} children for 5 sessions)"
                    return
        time.sleep(1.0)
        after = rss_kib(gw.own()[0])
        stateless = gw.endpoint.kind == "streamable" and not any(c.session for c in opened)
        gw.idle_growth = f"{(after - before) / 1024:+.1f} MiB" + (" (it gives no session id)" if stateless else "")
    except (CallFailed, OSError, http.client.HTTPException) as e:
        gw.idle_growth = f"session {len(opened) + 1} failed: {short(str(e), 120)}"
    finally:
        for c in opened:
            c.close()


# ---------------------------------------------------------------- the table


def median_us(t: Tally) -> float | None:
    return statistics.median(t.latencies_us) if t.latencies_us else None


def verdict(t: Tally) -> str:
    """Empty when every answer was right, else what went wrong (shown instead of a time)."""
    problems = []
    if t.wrong:
        crossed = f", {t.crossed()} of them the sum of another call of this run" if t.crossed() else ""
        problems.append(f"**{t.wrong} wrong answers** of {t.ok + t.wrong + t.failed} calls{crossed} (first: {t.first_wrong})")
    if t.failed:
        problems.append(f"**{t.failed} calls without an answer** (first: {short(t.first_failure, 160)})")
    return "; ".join(problems)


def table(gateways: list[Gateway], direct: Gateway, clients: int) -> str:
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    base_median = median_us(direct.seq)
    base_rate = direct.load.ok / direct.load_seconds if direct.load_seconds else 0.0
    head = (
        f"| gateway (same run) | version | median, sequential | added median vs direct | own CPU per call, {clients} clients "
        f"| calls/s, {clients} clients (% of direct) | RSS after the sequential calls / at the end | +100 idle sessions |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for gw in gateways:
        if gw.skipped:
            rows.append(f"| {gw.name} | {gw.version} | skipped: {gw.skipped} | | | | | |")
            continue
        med = median_us(gw.seq)
        seq_cell = verdict(gw.seq) or (f"{med:,.0f} µs" if med is not None else "–")
        added = "–" if verdict(gw.seq) or med is None or base_median is None or gw is direct else f"{med - base_median:+,.0f} µs"
        load_problem = verdict(gw.load)
        if load_problem:
            cpu_cell, rate_cell = "–", load_problem
        elif gw.load.ok:
            rate = gw.load.ok / gw.load_seconds
            cpu_cell = f"{gw.cpu_ticks * tick_us / gw.load.ok:,.0f} µs"
            rate_cell = f"{rate:,.0f}" + ("" if gw is direct or not base_rate else f" ({rate / base_rate:.0%})")
        else:
            cpu_cell, rate_cell = "–", "–"
        rss = f"{gw.rss_first_kib / 1024:.1f} / {gw.rss_kib / 1024:.1f} MiB" if gw.rss_kib else "–"
        rows.append(f"| {gw.name} | {gw.version} | {seq_cell} | {added} | {cpu_cell} | {rate_cell} | {rss} | {gw.idle_growth} |")
    return head + "\n".join(rows)


def machine() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    node = run(["node", "--version"], 30).stdout.strip() if shutil.which("node") else "no node"
    return f"{os.cpu_count()} cores, load average {load}, Python {sys.version.split()[0]}, node {node}"


# ---------------------------------------------------------------- main


PEERS: dict[str, Callable[[Path], Gateway]] = {
    "mcp-hub": start_mcp_hub,
    "supergateway": start_supergateway,
    "mcp-proxy": start_mcp_proxy,
    "contextforge": start_contextforge,
}
PINNED = {"mcp-hub": "4.2.1", "supergateway": "4.0.0", "mcp-proxy": "0.13.0", "contextforge": "1.0.7"}


def start_all(work: Path, evod: Path, only: set[str] | None) -> list[Gateway]:
    starters: list[tuple[str, str, Callable[[Path], Gateway]]] = [
        ("evo", "evo (no auth)", lambda w: start_evo(w, evod, False)),
        ("evo-token", "evo (API token)", lambda w: start_evo(w, evod, True)),
    ] + [(key, key, fn) for key, fn in PEERS.items()]
    gateways = []
    for key, name, fn in starters:
        if only is not None and key not in only:
            continue
        print(f"starting {name} …", file=sys.stderr, flush=True)
        try:
            gw = fn(work)
            gateways.append(gw)
            find_add(gw)
            print(f"  {gw.name} {gw.version}: `{gw.endpoint.tool if gw.endpoint else '?'}` at {gw.endpoint.url if gw.endpoint else '?'}", file=sys.stderr, flush=True)
        except (Skip, RuntimeError, OSError, subprocess.SubprocessError) as e:
            if gateways and gateways[-1].name == name:
                gateways.pop().stop()
            gateways.append(Gateway(name, PINNED.get(key, ""), skipped=short(str(e), 300)))
            print(f"  skipped: {e}", file=sys.stderr, flush=True)
    return gateways


def bench(args: argparse.Namespace) -> int:
    only = set(args.only.split(",")) if args.only else None
    work = Path(tempfile.mkdtemp(prefix="evo-peers-"))
    gateways: list[Gateway] = []
    try:
        load_before = machine()
        direct = start_direct(work)
        gateways = [direct] + start_all(work, Path(args.evod), only)
        live = [g for g in gateways if not g.skipped]
        print(f"{len(live) - 1} gateways and the direct server, {args.calls} sequential calls each …", file=sys.stderr, flush=True)
        sequential(live, args.calls, args.rounds)
        # Idle sessions before the load: a collector shrinking a heap after it would hide them.
        for gw in live:
            gw.rss_first_kib = rss_kib(gw.own()[0])
            idle_sessions(gw)
        for r in range(args.load_rounds):
            for gw in live[r % len(live) :] + live[: r % len(live)]:
                if not gw.load.failed > 20:
                    print(f"  {args.clients} clients, round {r + 1}: {gw.name}", file=sys.stderr, flush=True)
                    concurrent(gw, args.clients, args.seconds)
        for gw in live:
            gw.rss_kib = rss_kib(gw.own()[0])
        print(f"\n{table(gateways, direct, args.clients)}\n")
        print(f"Machine: {load_before} at the start; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end.")
        print(
            f"{args.calls} sequential calls per row in {args.rounds} alternating rounds on one keep-alive client; "
            f"100 idle sessions opened after those; then {args.clients} client processes for {args.load_rounds} × {args.seconds:.0f} s per row; own CPU and RSS: "
            "the gateway process and its descendants minus the stdio children (and theirs); every answer checked."
        )
        for gw in gateways:
            for note in gw.notes:
                print(f"- {gw.name}: {note}")
        # A peer's wrong answers are a finding; evo's, or the direct server's, a failure.
        bad = [g for g in live if (g is direct or g.name.startswith("evo")) and (verdict(g.seq) or verdict(g.load))]
        return 1 if bad else 0
    finally:
        for gw in gateways:
            gw.stop()
        if os.environ.get("EVO_PEERS_KEEP"):
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def self_test(args: argparse.Namespace) -> int:
    """The direct server and evod (no auth) in front of a child lying on every 10th call: the
    direct server's 50 answers must all be right, evod's 50 must have exactly 5 wrong ones."""
    work = Path(tempfile.mkdtemp(prefix="evo-peers-"))
    gateways: list[Gateway] = []
    try:
        gateways.append(start_direct(work))
        evo = start_evo(work, Path(args.evod), False, lie_every=10)
        gateways.append(evo)
        find_add(evo)
        for gw in gateways:
            assert gw.endpoint is not None
            client = Client(gw.endpoint).open()
            checked_calls(client, gw.seq, count=50)
            client.close()
        direct_ok = (gateways[0].seq.ok, gateways[0].seq.wrong, gateways[0].seq.failed) == (50, 0, 0)
        evo_caught = (evo.seq.ok, evo.seq.wrong, evo.seq.failed) == (45, 5, 0)
        print(f"direct: {gateways[0].seq.ok} right, {gateways[0].seq.wrong} wrong, {gateways[0].seq.failed} failed {verdict(gateways[0].seq)}")
        print(f"evo, a child lying every 10th call: {evo.seq.ok} right, {evo.seq.wrong} wrong, {evo.seq.failed} failed ({verdict(evo.seq)})")
        print("self-test " + ("passed" if direct_ok and evo_caught else "FAILED"))
        return 0 if direct_ok and evo_caught else 1
    except (Skip, RuntimeError, OSError, CallFailed) as e:
        print(f"self-test FAILED: {e}")
        return 1
    finally:
        for gw in gateways:
            gw.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer calls and shorter load (a first look)")
    p.add_argument("--only", help="comma-separated rows besides the direct server: evo,evo-token," + ",".join(PEERS))
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    p.add_argument("--evod", default=str(target / "release" / "evod"), help="the evod to measure, evoctl beside it ($CARGO_TARGET_DIR/release/evod)")
    p.add_argument("--calls", type=int, help="sequential calls per row (2000; --quick 300)")
    p.add_argument("--clients", type=int, default=16, help="concurrent client processes (16)")
    p.add_argument("--rounds", type=int, default=10, help="alternating rounds of sequential calls (10)")
    p.add_argument("--load-rounds", type=int, help="alternating rounds of concurrent load (3; --quick 1)")
    p.add_argument("--seconds", type=float, help="seconds per concurrent round (5; --quick 3)")
    p.add_argument("--self-test", action="store_true", help="no installs: the direct server and evod, 50 checked calls each")
    p.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--lie-every", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--serve-http", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_stdio:
        serve_stdio(args.lie_every)
        return 0
    if args.serve_http is not None:
        serve_http(args.serve_http)
        return 0
    if args.self_test:
        return self_test(args)
    rows = {"evo", "evo-token", *PEERS}
    if args.only and not set(args.only.split(",")) <= rows:
        p.error(f"--only {args.only}: the rows are {','.join(sorted(rows))}")
    args.calls = args.calls or (300 if args.quick else 2000)
    args.load_rounds = args.load_rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (3.0 if args.quick else 5.0)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
