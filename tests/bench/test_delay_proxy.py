#!/usr/bin/env python3
"""bench/delay_proxy.py forwards HTTP/1.1 as it is and holds each request for the RTT.

In front of the loopback hub (tests/support/hub_server.py, a tree made by
examples/hub/make_hub.py) and of a small upstream here that answers in
chunks: bodies, Range, HEAD and keep-alive come through unchanged, the LFS
redirect names the CDN's route, a chunked request and a chunked response
with a trailer come through whole, and the log has every request with its
status, bytes and a hold of at least the RTT (a lower bound, which a slow
machine cannot break). Also checks bench/latency.py's count of sequential
requests on made-up logs. No timing is asserted beyond that lower bound.

  test_delay_proxy.py --proxy bench/delay_proxy.py --latency bench/latency.py
                      --hub-server tests/support/hub_server.py --make-hub examples/hub/make_hub.py
"""

import argparse
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

RTT_MS = 150
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}", file=sys.stderr)


class Chunked(BaseHTTPRequestHandler):
    """Answers every request with its own body (or a fixed text) in three chunks and a trailer."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.reply(b"first chunk|second|third")

    def do_POST(self):
        body = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
        self.reply(body)

    def reply(self, body):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Trailer", "X-Check")
        self.end_headers()
        third = len(body) // 3
        for part in (body[:third], body[third:2 * third], body[2 * third:]):
            if part:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\nX-Check: done\r\n\r\n")

    def log_message(self, *args):
        pass


def get(conn, method, target, headers=None, body=None):
    conn.request(method, target, body=body, headers=headers or {})
    response = conn.getresponse()
    return response, response.read()


def main():
    parser = argparse.ArgumentParser()
    for name in ("proxy", "latency", "hub_server", "make_hub"):
        parser.add_argument("--" + name.replace("_", "-"), required=True)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kh-delay-proxy-"))
    blob = os.urandom(300_000)
    (work / "blob.bin").write_bytes(blob)
    text = "".join(f"line {i}\n" for i in range(10_000))
    spec = {"repos": [{"repo_id": "t/r", "type": "kernel", "commits": [{
        "message": "m", "branches": ["main"],
        "files": {"build/v/notes.txt": {"text": text}, "build/v/blob.bin": {"path": "blob.bin", "lfs": True}}}]}]}
    (work / "spec.json").write_text(json.dumps(spec))
    subprocess.run([sys.executable, args.make_hub, "--spec", str(work / "spec.json"), "--out", str(work / "hub")],
                   check=True)
    commit = json.loads((work / "hub" / "_hub.json").read_text())["repos"]["t/r"]["branches"]["main"]

    chunked = ThreadingHTTPServer(("127.0.0.1", 0), Chunked)
    threading.Thread(target=chunked.serve_forever, daemon=True).start()
    hub = subprocess.Popen([sys.executable, args.hub_server, "--root", str(work / "hub")], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    upstream = json.loads(hub.stdout.readline())
    proxy = subprocess.Popen([sys.executable, args.proxy, "--rtt-ms", str(RTT_MS),
                              "--route", f"hub,127.0.0.1,{upstream['endpoint']}",
                              "--route", f"cdn,127.0.0.2,{upstream['cdn']}",
                              "--route", f"echo,127.0.0.1,http://127.0.0.1:{chunked.server_address[1]}"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(line):
        proxy.stdin.write(line + "\n")
        proxy.stdin.flush()
        return json.loads(proxy.stdout.readline())

    try:
        routes = json.loads(proxy.stdout.readline())["routes"]
        hub_url, cdn_url = urlsplit(routes["hub"]), urlsplit(routes["cdn"])
        check(hub_url.hostname == "127.0.0.1" and cdn_url.hostname == "127.0.0.2", f"listeners: {routes}")
        direct = http.client.HTTPConnection(urlsplit(upstream["endpoint"]).netloc, timeout=30)
        conn = http.client.HTTPConnection(hub_url.netloc, timeout=30)
        revision = f"/api/kernels/t/r/revision/main"
        notes = f"/kernels/t/r/resolve/{commit}/build/v/notes.txt"

        response, body = get(conn, "GET", revision)
        _, expected = get(direct, "GET", revision)
        check(response.status == 200 and body == expected, "the revision answer comes through unchanged")
        response, body = get(conn, "GET", notes)
        check(response.status == 200 and body == text.encode(), "a plain file comes through whole")
        response, body = get(conn, "GET", notes, {"Range": "bytes=10-29"})
        check(response.status == 206 and body == text.encode()[10:30]
              and response.getheader("Content-Range") == f"bytes 10-29/{len(text)}", "a Range request gets its 206")
        response, body = get(conn, "HEAD", notes)
        check(response.status == 200 and body == b"" and response.getheader("Content-Length") == str(len(text)),
              "HEAD: the length, no body")
        response, _ = get(conn, "GET", f"/kernels/t/r/resolve/{commit}/build/v/blob.bin")
        location = urlsplit(response.getheader("Location") or "")
        check(response.status == 302 and location.netloc == cdn_url.netloc,
              f"the LFS redirect names the CDN's route, not {location.netloc!r}")
        cdn = http.client.HTTPConnection(cdn_url.netloc, timeout=30)
        response, body = get(cdn, "GET", location.path + "?" + location.query)
        check(response.status == 200 and body == blob, "the LFS blob comes through the CDN's route whole")

        echo = http.client.HTTPConnection(hub_url.hostname + ":" + routes["echo"].rsplit(":", 1)[1], timeout=30)
        response, body = get(echo, "GET", "/any")
        check(body == b"first chunk|second|third", f"a chunked response comes through whole: {body[:60]!r}")
        payload = os.urandom(70_000)
        echo.putrequest("POST", "/echo")
        echo.putheader("Transfer-Encoding", "chunked")
        echo.endheaders()
        for at in range(0, len(payload), 25_000):
            piece = payload[at:at + 25_000]
            echo.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        echo.send(b"0\r\n\r\n")
        response = echo.getresponse()
        check(response.read() == payload, "a chunked request body reaches upstream whole")

        check(ask("rtt 70000").get("error") is not None and ask("frobnicate").get("error") is not None,
              "the control channel refuses an RTT out of bounds and an unknown command")
        log = ask("log")
        entries = log["requests"]
        seen = [(e["route"], e["method"], e["status"]) for e in entries]
        check(seen == [("hub", "GET", 200), ("hub", "GET", 200), ("hub", "GET", 206), ("hub", "HEAD", 200),
                       ("hub", "GET", 302), ("cdn", "GET", 200), ("echo", "GET", 200), ("echo", "POST", 200)],
              f"the log names each request: {seen}")
        check(len({e["connection"] for e in entries[:5]}) == 1, "keep-alive: the hub's five requests shared a connection")
        check(all(e["error"] is None and e["end"] is not None for e in entries), "no request failed")
        check(all(e["forwarded"] - e["start"] >= RTT_MS / 1000 for e in entries),
              "every request was held at least the RTT before it went upstream")
        check(entries[5]["bytes"] == len(blob) and entries[7]["bytes"] == len(payload),
              "the log counts each response's body bytes")
        check(ask("rtt 0") == {"rtt_ms": 0.0} and ask("log")["requests"] == [], "rtt 0 is taken; the log was emptied")
        for c in (direct, conn, cdn, echo):
            c.close()
    finally:
        for p in (proxy, hub):
            p.stdin.close()
            p.wait(timeout=30)
        chunked.shutdown()

    # latency.py's chain of requests that waited for each other.
    spec = importlib.util.spec_from_file_location("latency", args.latency)
    latency = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(latency)

    def entry(start, end):
        return {"start": start, "forwarded": start, "end": end}

    in_a_row = [entry(0.0, 0.05), entry(0.0501, 0.1), entry(0.1, 0.15)]
    side_by_side = [entry(0.0, 0.05), entry(0.001, 0.052), entry(0.002, 0.06), entry(0.06, 0.11)]
    check(latency.longest_chain(in_a_row, 0.05) == 3, "three requests one after another are a chain of 3")
    check(latency.longest_chain(side_by_side, 0.05) == 2, "three side by side, then one: a chain of 2")
    check(latency.longest_chain([], 0.05) == 0, "no requests: no chain")

    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
