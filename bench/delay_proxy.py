#!/usr/bin/env python3
"""An HTTP/1.1 proxy on loopback that adds a round-trip time to every request.

Each route listens on one address (a free port) and forwards to one upstream
origin, for example the test hub on 127.0.0.1 and its LFS "CDN" on 127.0.0.2
(tests/support/hub_server.py). A client connection gets a thread and an
upstream connection of its own, opened as soon as the client connects, so
keep-alive on one side is keep-alive on the other. Requests and responses
are forwarded as they are (Content-Length or chunked bodies, Range, HEAD,
1xx). A body of known length goes from one socket to the other through a
pipe with splice(2), 1 MiB at a time, so the bytes never pass through
Python. A Location header that names one route's upstream origin is
rewritten to name that route's listener, so the hub's LFS redirect leads
through the CDN's route.

The delay: once a request's head has arrived, it is held for the whole RTT,
then forwarded; the response goes back as soon as upstream sends it. So every
request costs one RTT more than it would without the proxy, and requests in
flight together pay it together. Connection set-up is not delayed (on a real
network a new TCP connection costs one more RTT, and TLS one or two more):
for a client that opens new connections, the figures this proxy gives are a
lower bound.

Every request is logged: route, method, target, status, the client
connection's number, and monotonic times (time.monotonic(), a clock that
every process on the machine shares) when its head had arrived ("start"),
when it was forwarded ("forwarded") and when the last byte of its response
was handed to the client's socket ("end"), the response body's bytes, and an
error if the exchange failed.

Prints one line, {"routes": {NAME: URL}}, then reads commands on stdin, one a
line, each answered by one JSON line on stdout:

  rtt MS    sets the added round-trip time in milliseconds (0 to 60000)
  log       waits (at most 5 s) until no request is in flight, then answers
            {"requests": [ENTRY, ...], "dropped": N} and forgets them
            (N: entries past the log's bound of 100,000, not kept)

It exits when stdin reaches EOF, or on SIGTERM.

  bench/delay_proxy.py --route hub,127.0.0.1,http://127.0.0.1:8000 \\
                       --route cdn,127.0.0.2,http://127.0.0.2:8001 [--rtt-ms 50]

Python 3.10 or later, standard library only; Linux (splice).
"""

import argparse
import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

# Bounds on what a peer can make the proxy hold.
MAX_HEAD = 64 << 10  # a request or response line with its headers
MAX_HEADERS = 200
MAX_LINE = 4 << 10  # a chunk-size or trailer line
MAX_CONNECTIONS = 512  # client connections open at once
MAX_LOG = 100_000
MAX_RTT_MS = 60_000
LOG_WAIT_SECONDS = 5.0
BUFFER = 1 << 20  # the most one recv or splice moves


class ProtocolError(Exception):
    pass


class Peer:
    """One side of an exchange: a blocking socket and what was read past the last parse."""

    def __init__(self, sock):
        self.sock = sock
        self.pending = bytearray()

    def read_until(self, separator, limit):
        """Bytes up to and including separator; ProtocolError past limit, EOFError at a clean close."""
        start = 0
        while (at := self.pending.find(separator, start)) < 0:
            if len(self.pending) > limit:
                raise ProtocolError("head or line too long")
            start = max(0, len(self.pending) - len(separator) + 1)
            data = self.sock.recv(BUFFER)
            if not data:
                if self.pending:
                    raise ProtocolError("connection closed mid-head")
                raise EOFError
            self.pending += data
        end = at + len(separator)
        if end > limit:
            raise ProtocolError("head or line too long")
        line = bytes(self.pending[:end])
        del self.pending[:end]
        return line

    def copy_exact(self, dst, count, pipe):
        """Sends the next count bytes to dst: first what is buffered, the rest by splice."""
        take = min(count, len(self.pending))
        if take:
            dst.sendall(self.pending[:take])
            del self.pending[:take]
        left = count - take
        read_end, write_end = pipe
        while left > 0:
            moved = os.splice(self.sock.fileno(), write_end, min(left, BUFFER))
            if moved == 0:
                raise ProtocolError("connection closed mid-body")
            left -= moved
            while moved > 0:
                moved -= os.splice(read_end, dst.fileno(), moved)

    def copy_to_close(self, dst, pipe):
        total = len(self.pending)
        if self.pending:
            dst.sendall(self.pending)
            self.pending.clear()
        read_end, write_end = pipe
        while (moved := os.splice(self.sock.fileno(), write_end, BUFFER)) > 0:
            total += moved
            while moved > 0:
                moved -= os.splice(read_end, dst.fileno(), moved)
        return total


class Route:
    def __init__(self, name, listen_host, upstream):
        url = urlsplit(upstream)
        if url.scheme != "http" or not url.hostname or not url.port:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        self.name, self.listen_host = name, listen_host
        self.upstream = (url.hostname, url.port)
        self.upstream_origin = f"http://{url.hostname}:{url.port}"
        self.listener = socket.create_server((listen_host, 0), backlog=128)
        self.origin = f"http://{listen_host}:{self.listener.getsockname()[1]}"


class Proxy:
    def __init__(self, routes, rtt_ms):
        self.routes = routes
        self.rtt = rtt_ms / 1000
        self.lock = threading.Condition()
        self.log, self.dropped = [], 0
        self.in_flight = 0
        self.connections = 0  # numbered from 1, in the order accepted
        self.open = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def start(self):
        for route in self.routes:
            threading.Thread(target=self.accept, args=(route,), daemon=True).start()

    def accept(self, route):
        while True:
            client, _ = route.listener.accept()
            if not self.open.acquire(blocking=False):
                client.close()
                continue
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self.serve, args=(route, client, number), daemon=True).start()

    def serve(self, route, client, number):
        upstream = None
        pipe = os.pipe()
        try:
            fcntl.fcntl(pipe[1], fcntl.F_SETPIPE_SZ, BUFFER)
        except OSError:
            pass  # a smaller pipe only means more splice calls
        try:
            upstream = socket.create_connection(route.upstream)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            down, up = Peer(client), Peer(upstream)
            while self.exchange(route, number, down, up, pipe):
                pass
        except (OSError, EOFError, ProtocolError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()
            for fd in pipe:
                os.close(fd)
            self.open.release()

    def exchange(self, route, number, down, up, pipe):
        """Forwards one request and its response; False when the connection is done."""
        head = down.read_until(b"\r\n\r\n", MAX_HEAD)
        start = time.monotonic()
        request_line, headers = parse_head(head)
        method, target, version = split_request_line(request_line)
        entry = {"route": route.name, "method": method, "target": target, "status": None, "connection": number,
                 "start": start, "forwarded": None, "end": None, "bytes": 0, "error": None}
        with self.lock:
            if len(self.log) < MAX_LOG:
                self.log.append(entry)
            else:
                self.dropped += 1
            self.in_flight += 1
            delay = self.rtt
        try:
            if delay > 0:
                time.sleep(delay)
            entry["forwarded"] = time.monotonic()
            up.sock.sendall(head)
            copy_body(down, up.sock, body_framing(headers, False), pipe)
            while True:
                response = up.read_until(b"\r\n\r\n", MAX_HEAD)
                status_line, response_headers = parse_head(response)
                status = parse_status(status_line)
                if not 100 <= status < 200 or status == 101:
                    break
                down.sock.sendall(response)  # 100 Continue and the like: the final head follows
            entry["status"] = status
            if header(response_headers, b"location") is not None:
                response = rewrite_head(status_line, response_headers, self.rewrite_location)
            down.sock.sendall(response)
            no_body = method == "HEAD" or status in (204, 304)
            framing = ("length", 0) if no_body else body_framing(response_headers, True)
            entry["bytes"] = copy_body(up, down.sock, framing, pipe)
            entry["end"] = time.monotonic()
        except BaseException as e:
            entry["error"] = repr(e)[:200]
            raise
        finally:
            with self.lock:
                self.in_flight -= 1
                self.lock.notify_all()
        return (version == "HTTP/1.1" and framing[0] != "close" and not has_token(headers, b"connection", b"close")
                and not has_token(response_headers, b"connection", b"close"))

    def rewrite_location(self, value):
        for route in self.routes:
            if value == route.upstream_origin or value.startswith(route.upstream_origin + "/"):
                return route.origin + value[len(route.upstream_origin):]
        return value

    def set_rtt(self, ms):
        with self.lock:
            self.rtt = ms / 1000

    def take_log(self):
        with self.lock:
            self.lock.wait_for(lambda: self.in_flight == 0, timeout=LOG_WAIT_SECONDS)
            log, dropped = self.log, self.dropped
            self.log, self.dropped = [], 0
        return {"requests": log, "dropped": dropped}


def parse_head(head):
    lines = head[:-4].split(b"\r\n")
    if len(lines) - 1 > MAX_HEADERS:
        raise ProtocolError("too many headers")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return lines[0], headers


def split_request_line(line):
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise ProtocolError(f"bad request line {line[:80]!r}")
    return parts


def parse_status(line):
    parts = line.split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.0", b"HTTP/1.1") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {line[:80]!r}")
    return int(parts[1])


def rewrite_head(status_line, headers, rewrite):
    out = [status_line]
    for name, value in headers:
        if name.lower() == b"location":
            value = rewrite(value.decode("latin-1")).encode("latin-1")
        out.append(name + b": " + value)
    return b"\r\n".join(out) + b"\r\n\r\n"


def header(headers, wanted):
    values = [value for name, value in headers if name.lower() == wanted]
    return values[-1] if values else None


def has_token(headers, name, token):
    value = header(headers, name)
    return value is not None and token in [t.strip().lower() for t in value.split(b",")]


def body_framing(headers, is_response):
    """("chunked", 0), ("length", N) or ("close", 0): how a body ends."""
    if has_token(headers, b"transfer-encoding", b"chunked"):
        return ("chunked", 0)
    length = header(headers, b"content-length")
    if length is not None:
        if not length.isdigit():
            raise ProtocolError("bad Content-Length")
        return ("length", int(length))
    # A request with neither has no body; a response runs to the close.
    return ("close", 0) if is_response else ("length", 0)


def copy_body(src, dst, framing, pipe):
    """Copies one body from Peer src to socket dst as framed; returns its payload bytes."""
    kind, length = framing
    if kind == "length":
        src.copy_exact(dst, length, pipe)
        return length
    if kind == "close":
        return src.copy_to_close(dst, pipe)
    total = 0
    while True:
        line = src.read_until(b"\r\n", MAX_LINE)
        dst.sendall(line)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            while (trailer := src.read_until(b"\r\n", MAX_LINE)) != b"\r\n":  # trailers, then a blank line
                dst.sendall(trailer)
            dst.sendall(b"\r\n")
            return total
        src.copy_exact(dst, size + 2, pipe)  # the chunk and its CRLF
        total += size


def command(proxy, line):
    """The answer to one control line, or None for a blank one."""
    words = line.split()
    if words[:1] == ["rtt"] and len(words) == 2:
        try:
            ms = float(words[1])
        except ValueError:
            ms = -1.0
        if not 0 <= ms <= MAX_RTT_MS:
            return {"error": f"rtt takes milliseconds from 0 to {MAX_RTT_MS}"}
        proxy.set_rtt(ms)
        return {"rtt_ms": ms}
    if words == ["log"]:
        return proxy.take_log()
    if words:
        return {"error": f"unknown command {words[0][:40]!r} (rtt MS, log)"}
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--route", action="append", required=True, metavar="NAME,LISTEN_HOST,UPSTREAM_URL",
                        help="listen on LISTEN_HOST (a free port) and forward to UPSTREAM_URL (http://HOST:PORT)")
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="added round-trip time (default 0)")
    args = parser.parse_args()
    if not 0 <= args.rtt_ms <= MAX_RTT_MS:
        parser.error(f"--rtt-ms must be from 0 to {MAX_RTT_MS}")
    routes = []
    for spec in args.route:
        parts = spec.split(",")
        if len(parts) != 3:
            parser.error(f"--route takes NAME,LISTEN_HOST,UPSTREAM_URL, not {spec!r}")
        try:
            routes.append(Route(*parts))
        except (ValueError, OSError) as e:
            parser.error(f"--route {spec}: {e}")
    proxy = Proxy(routes, args.rtt_ms)
    proxy.start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(json.dumps({"routes": {r.name: r.origin for r in routes}}), flush=True)
    # Commands until EOF: only the first MAX_LINE characters of a line count.
    while line := sys.stdin.readline(MAX_LINE):
        answer = command(proxy, line)
        rest = line
        while not rest.endswith("\n") and (rest := sys.stdin.readline(MAX_LINE)):
            pass
        if answer is not None:
            print(json.dumps(answer, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
