#!/usr/bin/env python3
"""A loopback hub for tests: serves a tree laid out by examples/hub/make_hub.py.

Speaks the Hub HTTP protocol (revision, refs, paginated recursive tree,
resolve with LFS redirects, Range/If-Range, organisation overviews) on one host and a "CDN" for LFS
blobs on another, so clients must drop Authorization on the redirect. Tests
steer it through control endpoints on the hub host, which are never counted
and never faulted:

  GET  /_stats   {"requests": [{"host","method","path","status","auth","range","sent"}],
                  "connections": {"hub": N, "cdn": N}, "peak_in_flight": {"hub": N, "cdn": N},
                  "held": {GATE: N}}
                 "path" is the request target as sent (percent-encoded, with query);
                 "sent" counts the body bytes handed to the socket (final once the client has them);
                 "connections" counts TCP connections accepted, "peak_in_flight" the most
                 requests (control ones aside) one host was answering at the same time,
                 "held" the requests waiting at each gate of a "hold" rule now
  POST /_reset   forget requests and fault rules; let every held request go on
  POST /_release {"gate": G} lets the requests held at gate G go on, and later ones
                 pass it, until /_reset
  POST /_held    {"gate": G, "count"?: N, "seconds"?: S} answers {"held": n} as soon as
                 N (default 1) requests wait at gate G, or after S seconds (default 20)
                 with fewer: a test waits for a request to be in flight without sleeping
  POST /_faults  {"faults": [RULE, ...]} appends rules; the first rule whose
                 "match" is a substring of the request target applies:
                 {"action": "status", "status": 503, "retry_after"?, "error_code"?}
                 {"action": "truncate", "after_bytes": N}   true Content-Length, N bytes, close
                 {"action": "corrupt"}                      one body byte flipped
                 {"action": "delay", "seconds": S}
                 {"action": "hold", "gate": G, "seconds"?: S, "status"?: N}  the reply waits
                     until /_release opens gate G or /_reset (at most S seconds, default 60),
                     then is the answer, or with "status" an error of that status
                 {"action": "throttle", "bytes_per_second": N}  body sent at about N B/s
                 {"action": "pad_tree", "entries": N, "prefix"?: P}  a tree page gets N more
                     file entries, paths P0, P1, ... numbered on across pages (default
                     prefix "junk/f"): a hostile listing; with "bytes_per_second" also throttled
                 {"action": "twin_tree", "suffix": S}  a tree page lists the first path ending in S
                     twice, the second time with other ids: a hostile listing
                 {"action": "twin_tree", "suffix": S, "size": N}  instead that entry's size
                     (and LFS size) says N: a listing its files will not match
                 {"action": "bloat_answer", "depth": N}  a JSON answer replaced by N nested arrays
                 {"action": "bloat_answer", "siblings": N}  a JSON object answer gets N more
                     "siblings" entries (a huge revision answer around the real "sha")
                 {"action": "bad_range", "value_bytes": N}  a reply with a body becomes a 206
                     whose Content-Range is an escape sequence and N bytes of words: no range
                 "count": uses left (default 1, -1 = forever). truncate and corrupt
                 only apply to (and are only used up by) replies with a body.

Prints one line, {"endpoint": URL, "cdn": URL}, then serves until stdin reaches
EOF (the parent died or let go) or SIGTERM. Python 3.11 standard library only.
"""

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

CONTROL_PATHS = ("/_stats", "/_reset", "/_faults", "/_release", "/_held")
# Each fault action and the field it cannot do without.
FAULT_ACTIONS = {"status": "status", "truncate": "after_bytes", "corrupt": "match", "delay": "seconds", "hold": "gate",
                 "throttle": "bytes_per_second", "pad_tree": "entries", "twin_tree": "suffix", "bloat_answer": "match",
                 "bad_range": "value_bytes"}
CHUNK = 1 << 16
# The longest a held request waits for its gate unless its rule says: a test
# that fails before it releases the gate then costs a minute, not its timeout.
HOLD_SECONDS = 60
# The longest /_held waits unless asked: below the test client's 30 s timeout.
HELD_WAIT_SECONDS = 20


def dump_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def strip_etag(value: str) -> str:
    value = value.strip()
    return (value[2:] if value.startswith("W/") else value).strip('"')


class Reply:
    """A response before it is sent; the body is bytes or a slice of a file."""

    def __init__(self, status, headers=(), data=b"", file=None, start=0, length=0):
        self.status, self.headers = status, list(headers)
        self.data, self.file, self.start = data, file, start
        self.length = length if file is not None else len(data)

    def chunks(self):
        if self.file is None:
            yield self.data
            return
        with open(self.file, "rb") as f:
            f.seek(self.start)
            left = self.length
            while left > 0 and (chunk := f.read(min(CHUNK, left))):
                left -= len(chunk)
                yield chunk


def error_reply(status, code, message, headers=()) -> Reply:
    headers = [("Content-Type", "application/json"), ("X-Error-Message", message), *headers]
    if code:
        headers.append(("X-Error-Code", code))
    return Reply(status, headers, dump_json({"error": message}))


def bad_range(reply, rule) -> Reply:
    words = " ".join(["A" * 15] * (int(rule["value_bytes"]) // 16))
    junk = "\x1b[31m" + words
    return Reply(206, [*reply.headers, ("Content-Range", junk)], reply.data, reply.file, reply.start, reply.length)


def tree_page(reply):
    """The entries of a tree page reply, or None for any other reply."""
    if reply.status != 200 or reply.file is not None:
        return None
    page = json.loads(reply.data)
    return page if isinstance(page, list) else None


def pad_tree(reply, rule) -> Reply:
    """A tree page with rule["entries"] made-up file entries appended (hostile listings)."""
    page = tree_page(reply)
    if page is None:
        return reply
    prefix, oid, count = str(rule.get("prefix", "junk/f")), "0" * 40, int(rule["entries"])
    # Numbered on from the last page's entries, so every page adds new paths.
    first = rule.get("padded", 0)
    rule["padded"] = first + count
    # Written piece by piece: a million entries as dicts would cost the
    # server more memory than the client under test.
    extra = b"".join(b',{"type":"file","oid":"%s","size":1,"path":%s}' % (oid.encode(), dump_json(f"{prefix}{i}"))
                     for i in range(first, first + count))
    body = dump_json(page)[:-1] + (extra[1:] if not page else extra) + b"]"
    return Reply(reply.status, reply.headers, body)


def twin_tree(reply, rule) -> Reply:
    """A tree page that lists one path twice with different ids (hostile listings)."""
    page = tree_page(reply)
    if page is None:
        return reply
    for entry in page:
        if isinstance(entry, dict) and str(entry.get("path", "")).endswith(str(rule["suffix"])):
            if "size" in rule:
                entry["size"] = int(rule["size"])
                if isinstance(entry.get("lfs"), dict):
                    entry["lfs"]["size"] = int(rule["size"])
                break
            twin = json.loads(json.dumps(entry))
            twin["oid"] = "e" * 40
            if isinstance(twin.get("lfs"), dict):
                twin["lfs"]["oid"] = "e" * 64
            page.append(twin)
            break
    return Reply(reply.status, reply.headers, dump_json(page))


def bloat_answer(reply, rule) -> Reply:
    """A JSON answer made huge: nested deep, or padded around its fields."""
    if reply.status != 200 or reply.file is not None:
        return reply
    if "depth" in rule:
        depth = int(rule["depth"])
        return Reply(reply.status, reply.headers, b"[" * depth + b"]" * depth)
    doc = json.loads(reply.data)
    count = int(rule["siblings"])
    body = dump_json(doc)[:-1] + b',"more":[' + b",".join([b"{}"] * count) + b"]}"
    return Reply(reply.status, reply.headers, body)


class HubIndex:
    """One loaded _hub.json plus lookups derived from it."""

    def __init__(self, root: Path):
        self.root = root
        self.repos = json.loads((root / "_hub.json").read_bytes())["repos"]
        # (repo_id, commit) -> {path: file entry}, and LFS sha256 -> bytes on disk.
        self.files, self.lfs_blobs = {}, {}
        for repo_id, repo in self.repos.items():
            for commit, tree in repo["trees"].items():
                entries = {e["path"]: e for e in tree if e["type"] == "file"}
                self.files[(repo_id, commit)] = entries
                for path, e in entries.items():
                    if "lfs" in e:
                        self.lfs_blobs[e["lfs"]["oid"]] = self.resolve_file(repo_id, commit, path)

    def resolve_file(self, repo_id, commit, path) -> Path:
        prefix = "kernels/" if self.repos[repo_id]["type"] == "kernel" else ""
        return self.root / f"{prefix}{repo_id}" / "resolve" / commit / path

    def commit_for(self, repo_id, rev):
        repo = self.repos[repo_id]
        if rev in repo["commits"]:
            return rev
        # The hub also takes a ref's full name, as list_repo_refs gives it
        # (kernels' versions are refs/heads/vN).
        if rev.startswith("refs/heads/"):
            return repo["branches"].get(rev[len("refs/heads/"):])
        if rev.startswith("refs/tags/"):
            return repo["tags"].get(rev[len("refs/tags/"):])
        return repo["branches"].get(rev) or repo["tags"].get(rev)


class Hub:
    """Reloads the index whenever make_hub.py rewrites the tree under us."""

    def __init__(self, root: Path):
        self.root, self.lock, self.stamp, self.index = root, threading.Lock(), None, None

    def current(self) -> HubIndex:
        st = os.stat(self.root / "_hub.json")
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self.lock:
            if stamp != self.stamp:
                self.index, self.stamp = HubIndex(self.root), stamp
            return self.index


class Control:
    """Request log and fault rules shared by both servers."""

    def __init__(self):
        self.lock, self.requests, self.faults = threading.Lock(), [], []
        self.connections, self.in_flight, self.peak = {}, {}, {}
        # Gates of "hold" rules: the requests waiting at each, the gates
        # released, and a count of resets, each of which lets every waiting
        # request go on.
        self.changed = threading.Condition(self.lock)
        self.held, self.opened, self.resets = {}, set(), 0

    def record(self, entry):
        with self.lock:
            self.requests.append(entry)

    def connected(self, host):
        with self.lock:
            self.connections[host] = self.connections.get(host, 0) + 1

    def enter(self, host):
        with self.lock:
            self.in_flight[host] = self.in_flight.get(host, 0) + 1
            self.peak[host] = max(self.peak.get(host, 0), self.in_flight[host])

    def leave(self, host):
        with self.lock:
            self.in_flight[host] -= 1

    def add_faults(self, rules):
        for rule in rules:
            if not isinstance(rule, dict) or not isinstance(rule.get("match"), str):
                raise ValueError(f"a fault rule needs a string 'match': {rule!r}")
            if rule.get("action") not in FAULT_ACTIONS:
                raise ValueError(f"fault action must be one of {', '.join(FAULT_ACTIONS)}: {rule!r}")
            if FAULT_ACTIONS[rule["action"]] not in rule:
                raise ValueError(f"a {rule['action']!r} fault needs {FAULT_ACTIONS[rule['action']]!r}: {rule!r}")
        with self.lock:
            self.faults.extend(dict(r, count=r.get("count", 1)) for r in rules)

    def take_fault(self, target, has_body):
        with self.lock:
            for rule in self.faults:
                body_only = rule["action"] in ("truncate", "corrupt", "throttle", "bad_range")
                if rule["count"] != 0 and rule["match"] in target and (has_body or not body_only):
                    if rule["count"] > 0:
                        rule["count"] -= 1
                    return rule
        return None

    def hold(self, gate, seconds):
        with self.changed:
            resets = self.resets
            self.held[gate] = self.held.get(gate, 0) + 1
            self.changed.notify_all()
            self.changed.wait_for(lambda: gate in self.opened or self.resets != resets, timeout=seconds)
            self.held[gate] -= 1

    def release(self, gate):
        with self.changed:
            self.opened.add(gate)
            self.changed.notify_all()

    def wait_held(self, gate, count, seconds):
        with self.changed:
            self.changed.wait_for(lambda: self.held.get(gate, 0) >= count, timeout=seconds)
            return self.held.get(gate, 0)

    def reset(self):
        with self.changed:
            self.requests.clear()
            self.faults.clear()
            self.connections.clear()
            self.peak = dict(self.in_flight)
            self.opened.clear()
            self.resets += 1
            self.changed.notify_all()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kernhub-test-hub"
    # Headers and body go out as separate writes; with Nagle on, a keep-alive
    # client's delayed ACK stalls every reply by ~40 ms.
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        self.server.control.connected(self.server.role)

    def do_GET(self):
        self.handle_request("GET")

    def do_HEAD(self):
        self.handle_request("HEAD")

    def do_POST(self):
        self.handle_request("POST")

    def log_message(self, format, *args):
        if self.server.options.verbose:
            sys.stderr.write(f"{self.server.role}: {format % args}\n")

    def handle_request(self, method):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        if self.server.role == "hub" and url.path in CONTROL_PATHS:
            return self.send_reply(self.control(method, url.path, body), method)
        try:
            reply = self.route(method, [unquote(s) for s in url.path.split("/")[1:]], url)
        except Exception:
            traceback.print_exc()
            reply = error_reply(500, "", "Internal error in the test hub")
        control = self.server.control
        rule = control.take_fault(self.path, method != "HEAD" and reply.length > 0)
        limit = flip_at = rate = None
        if rule and rule["action"] == "status":
            extra = [("Retry-After", str(rule["retry_after"]))] if "retry_after" in rule else []
            reply = error_reply(int(rule["status"]), rule.get("error_code", ""), rule.get("message", "Injected fault"), extra)
        elif rule and rule["action"] == "delay":
            time.sleep(float(rule["seconds"]))
        elif rule and rule["action"] == "hold":
            control.hold(str(rule["gate"]), float(rule.get("seconds", HOLD_SECONDS)))
            if "status" in rule:
                reply = error_reply(int(rule["status"]), rule.get("error_code", ""),
                                    rule.get("message", "Injected fault"), [])
        elif rule and rule["action"] == "truncate":
            limit = int(rule["after_bytes"])
        elif rule and rule["action"] == "corrupt":
            flip_at = reply.length // 2
        elif rule and rule["action"] == "throttle":
            rate = float(rule["bytes_per_second"])
        elif rule and rule["action"] == "bloat_answer":
            reply = bloat_answer(reply, rule)
        elif rule and rule["action"] == "twin_tree":
            reply = twin_tree(reply, rule)
        elif rule and rule["action"] == "bad_range":
            reply = bad_range(reply, rule)
        elif rule and rule["action"] == "pad_tree":
            reply = pad_tree(reply, rule)
            rate = float(rule["bytes_per_second"]) if "bytes_per_second" in rule else None
        entry = {
            "host": self.server.role,
            "method": method,
            "path": self.path,
            "status": reply.status,
            "auth": "Authorization" in self.headers,
            "range": self.headers.get("Range"),
            "sent": 0,
        }
        control.record(entry)
        control.enter(self.server.role)
        try:
            self.send_reply(reply, method, limit, flip_at, rate, entry)
        finally:
            control.leave(self.server.role)

    def send_reply(self, reply, method, limit=None, flip_at=None, rate=None, entry=None):
        """Send headers with the true length; a limit cuts the body and the connection."""
        try:
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(reply.length))
            self.end_headers()
            if method == "HEAD":
                return
            sent = 0
            started = time.monotonic()
            for whole in reply.chunks():
                # Throttled replies go out in small pieces so the pace is even.
                step = max(1, int(rate) // 20) if rate else len(whole) or 1
                for at in range(0, max(len(whole), 1), step):
                    chunk = whole[at : at + step]
                    if flip_at is not None and sent <= flip_at < sent + len(chunk):
                        chunk = bytearray(chunk)
                        chunk[flip_at - sent] ^= 0xFF
                    if limit is not None:
                        chunk = chunk[: max(0, limit - sent)]
                    if rate:
                        time.sleep(max(0.0, started + sent / rate - time.monotonic()))
                    # Counted before the write: a client that has read the
                    # whole reply and asks /_stats at once must find it
                    # counted, not race this thread's next line. A write
                    # that fails puts the count back.
                    if entry is not None:
                        entry["sent"] = sent + len(chunk)
                    try:
                        self.wfile.write(chunk)
                    except ConnectionError:
                        if entry is not None:
                            entry["sent"] = sent
                        raise
                    sent += len(chunk)
                    if limit is not None and sent >= limit:
                        break
                if limit is not None and sent >= limit:
                    self.close_connection = True
                    return
        except ConnectionError:
            self.close_connection = True

    def control(self, method, path, body) -> Reply:
        control = self.server.control
        if path == "/_stats" and method in ("GET", "HEAD"):
            with control.lock:
                data = dump_json({"requests": control.requests, "connections": control.connections,
                                  "peak_in_flight": control.peak, "held": control.held})
            return Reply(200, [("Content-Type", "application/json")], data)
        if path == "/_reset" and method == "POST":
            control.reset()
            return Reply(200, [("Content-Type", "application/json")], b"{}")
        if path == "/_faults" and method == "POST":
            try:
                control.add_faults(json.loads(body or b"{}").get("faults", []))
            except (ValueError, AttributeError) as e:
                return error_reply(400, "", f"bad fault rules: {e}")
            return Reply(200, [("Content-Type", "application/json")], b"{}")
        if path in ("/_release", "/_held") and method == "POST":
            try:
                request = json.loads(body or b"{}")
                gate = request["gate"]
                if not isinstance(gate, str):
                    raise ValueError("'gate' must be a string")
                if path == "/_release":
                    control.release(gate)
                    return Reply(200, [("Content-Type", "application/json")], b"{}")
                count = int(request.get("count", 1))
                held = control.wait_held(gate, count, float(request.get("seconds", HELD_WAIT_SECONDS)))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                return error_reply(400, "", f"bad {path[2:]} request: {e!r}")
            return Reply(200, [("Content-Type", "application/json")], dump_json({"held": held}))
        return error_reply(405, "", f"{method} {path} is not supported")

    def route(self, method, segs, url) -> Reply:
        if method not in ("GET", "HEAD"):
            return error_reply(405, "", f"{method} is not supported")
        index = self.server.hub.current()
        if self.server.role == "cdn":
            blob = index.lfs_blobs.get(segs[1]) if len(segs) == 2 and segs[0] == "lfs" else None
            if blob is None:
                return error_reply(404, "EntryNotFound", "Entry not found")
            return self.file_reply(blob, segs[1], [])
        if segs[0] == "api" and len(segs) == 4 and segs[1] == "organizations" and segs[3] == "overview":
            return self.organization(index, segs[2])
        if segs[0] == "api" and len(segs) >= 5 and segs[1] in ("kernels", "models"):
            return self.api(index, segs[1][:-1], "/".join(segs[2:4]), segs[4], segs[5:], url)
        if len(segs) >= 5 and segs[0] == "kernels" and segs[3] == "resolve":
            return self.resolve(index, "kernel", "/".join(segs[1:3]), segs[4], segs[5:])
        if len(segs) >= 4 and segs[2] == "resolve":
            return self.resolve(index, "model", "/".join(segs[0:2]), segs[3], segs[4:])
        return error_reply(404, "", "Not found")

    def organization(self, index, name) -> Reply:
        # make_hub.py checked the names it wrote; a request's name is only
        # looked up among the directory's entries, never joined as a path.
        folder = index.root / "api" / "organizations"
        if not folder.is_dir() or name not in os.listdir(folder):
            return error_reply(404, "", f"Organization not found: {name}")
        return Reply(200, [("Content-Type", "application/json")], (folder / name / "overview").read_bytes())

    def check_repo(self, index, kind, repo_id):
        """An error reply when the repo is unknown, of the other type, or private to us."""
        repo = index.repos.get(repo_id)
        if repo is None or repo["type"] != kind:
            return error_reply(404, "RepoNotFound", "Repository not found")
        token = self.server.options.token
        if repo["private"] and not (token and self.headers.get("Authorization") == f"Bearer {token}"):
            return error_reply(401, "RepoNotFound", "Repository not found")
        return None

    def api(self, index, kind, repo_id, action, rest, url) -> Reply:
        if denied := self.check_repo(index, kind, repo_id):
            return denied
        static = index.root / "api" / f"{kind}s" / repo_id
        json_type = [("Content-Type", "application/json")]
        if action == "refs" and not rest:
            return Reply(200, json_type, (static / "refs").read_bytes())
        if action not in ("revision", "tree") or not rest:
            return error_reply(404, "", "Not found")
        commit = index.commit_for(repo_id, rest[0])
        if commit is None:
            return error_reply(404, "RevisionNotFound", f"Invalid rev id: {rest[0]}")
        if action == "revision" and len(rest) == 1:
            return Reply(200, json_type, (static / "revision" / rest[0]).read_bytes())
        if action == "tree":
            return self.tree(index.repos[repo_id]["trees"][commit], "/".join(s for s in rest[1:] if s), url)
        return error_reply(404, "", "Not found")

    def tree(self, tree, path, url) -> Reply:
        query = dict(parse_qsl(url.query))
        if path and not any(e["path"] == path and e["type"] == "directory" for e in tree):
            return error_reply(404, "EntryNotFound", f"Entry not found: {path}")
        prefix = f"{path}/" if path else ""
        entries = [e for e in tree if e["path"].startswith(prefix)]
        if query.get("recursive", "").lower() not in ("1", "true"):
            entries = [e for e in entries if "/" not in e["path"][len(prefix):]]
        if not query.get("cursor", "0").isdigit():
            return error_reply(400, "", "cursor must be a non-negative integer")
        start, size = int(query.get("cursor", "0")), self.server.options.page_size
        headers = [("Content-Type", "application/json")]
        if start + size < len(entries):
            query["cursor"] = str(start + size)
            host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
            headers.append(("Link", f'<http://{host}{url.path}?{urlencode(query)}>; rel="next"'))
        return Reply(200, headers, dump_json(entries[start : start + size]))

    def resolve(self, index, kind, repo_id, rev, rest) -> Reply:
        if denied := self.check_repo(index, kind, repo_id):
            return denied
        commit = index.commit_for(repo_id, rev)
        if commit is None:
            return error_reply(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        path = "/".join(rest)
        entry = index.files[(repo_id, commit)].get(path)
        headers = [("X-Repo-Commit", commit)]
        if entry is None:
            return error_reply(404, "EntryNotFound", f"Entry not found: {path}", headers)
        if "lfs" not in entry:
            return self.file_reply(index.resolve_file(repo_id, commit, path), entry["oid"], headers)
        sha256 = entry["lfs"]["oid"]
        location = f"{self.server.options.cdn_url}/lfs/{sha256}?repo={quote(repo_id, safe='')}"
        headers += [
            ("Location", location),
            ("X-Linked-Etag", f'"{sha256}"'),
            ("X-Linked-Size", str(entry["size"])),
            ("ETag", f'"{sha256}"'),
        ]
        return Reply(302, headers)

    def file_reply(self, file: Path, etag: str, headers) -> Reply:
        """The file, or the part a Range asks for (unless If-Range names another version)."""
        total = file.stat().st_size
        headers = headers + [("ETag", f'"{etag}"'), ("Content-Type", "application/octet-stream"),
                             ("Accept-Ranges", "bytes")]
        wanted = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", (wanted or "").strip())
        if not m or not (m[1] or m[2]) or (if_range is not None and strip_etag(if_range) != etag):
            return Reply(200, headers, file=file, length=total)
        if m[1]:
            start, end = int(m[1]), min(int(m[2]) if m[2] else total - 1, total - 1)
            if m[2] and int(m[2]) < start:  # syntactically invalid: ignore the header
                return Reply(200, headers, file=file, length=total)
        else:
            start, end = max(0, total - int(m[2])), total - 1
        if start >= total or end < start:
            return Reply(416, headers + [("Content-Range", f"bytes */{total}")])
        headers.append(("Content-Range", f"bytes {start}-{end}/{total}"))
        return Reply(206, headers, file=file, start=start, length=end - start + 1)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 overflows when a client opens 64
    # connections at once (KERNHUB_MAX_CONNECTIONS=64): SYNs get dropped and
    # retried a second later, and timings would measure that.
    request_queue_size = 128

    def __init__(self, host, role, hub, control, options):
        super().__init__((host, 0), Handler)
        self.role, self.hub, self.control, self.options = role, hub, control, options

    @property
    def url(self):
        return "http://%s:%d" % self.server_address[:2]

    def handle_error(self, request, client_address):
        # Clients that hang up mid-reply are routine in fault tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve a make_hub.py tree over loopback HTTP.")
    parser.add_argument("--root", required=True, type=Path, help="the hub tree (holds _hub.json)")
    parser.add_argument("--host", default="127.0.0.1", help="address of the hub (default 127.0.0.1)")
    parser.add_argument("--cdn-host", default="127.0.0.2", help="address of the LFS CDN (default 127.0.0.2)")
    parser.add_argument("--token", default="", help="the token that opens private repos")
    parser.add_argument("--page-size", type=int, default=1000, help="tree entries per page (default 1000)")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    options = parser.parse_args()
    if options.page_size < 1:
        parser.error("--page-size must be at least 1")

    hub, control = Hub(options.root.absolute()), Control()
    try:
        hub.current()  # fail now, not on the first request, when the tree is unusable
    except (OSError, ValueError, KeyError) as e:
        parser.error(f"cannot load the hub index {str(options.root / '_hub.json')!r}: {e!r}")
    # Installed before the ready line, so a parent that stops us right after
    # reading it gets a clean exit.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    cdn = Server(options.cdn_host, "cdn", hub, control, options)
    options.cdn_url = cdn.url
    servers = [Server(options.host, "hub", hub, control, options), cdn]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"endpoint": servers[0].url, "cdn": cdn.url}), flush=True)

    def watch_stdin():
        while os.read(0, 4096):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    # Exiting closes the sockets and ends the daemon threads serving them; a
    # shutdown() handshake would only make every test wait for it.
    return 0


if __name__ == "__main__":
    sys.exit(main())
