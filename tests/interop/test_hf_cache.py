#!/usr/bin/env python3
"""Interop: the real Python huggingface_hub reads a cache that kernhub filled.

Lays out a small hub with examples/hub/make_hub.py (a *model* repo and a
*kernel* repo, each with build/<native-cpu variant>/ holding a real .so, a
generated metadata.json and a nested text file), serves it with
tests/support/hub_server.py, fills cache A with `kernhub fetch`, then checks
with huggingface_hub in child processes (so HF_HUB_OFFLINE, HF_HUB_CACHE and
HF_ENDPOINT are read at import time, as in real use):

  (a) offline hf_hub_download / try_to_load_from_cache / snapshot_download of
      the model repo find kernhub's snapshot files, by branch and by commit,
      and make no request to the hub;
  (b) scan_cache_dir lists the repos with no warnings, the right repo_type,
      commit, refs {"main"}, nb_files and size_on_disk;
  (c) the kernel repo: the same when this huggingface_hub knows repo_type
      "kernel", else scan_cache_dir must not crash (its warning is printed);
  (d) huggingface_hub downloads the same files from the hub into cache B;
      blobs/<etag>, the snapshot symlink targets and refs/main must be
      byte-for-byte what kernhub wrote;
  (d2) huggingface_hub online over kernhub's cache reuses its files, and
      force_download replaces a read-only kernhub blob;
  (e) huggingface_hub can delete kernhub's revisions (hf cache delete).

Prints one PASS/FAIL line per check (INFO/DIFF lines are facts that do not
fail the test), then "N passed, N failed". Exit 0 when all pass, 1 when any
check fails, 77 (before any check, printing "SKIPPED: <reason>") when
huggingface_hub is not installed, or with --repo-type kernel when it has no
repo_type "kernel". --repo-type limits the run to the model or the kernel
repo; ctest runs each as its own test.

Usage: test_hf_cache.py --kernhub CLI --so LIB.so --make-hub make_hub.py
                        --hub-server hub_server.py [--demo-hub DIR] [--python EXE]
                        [--repo-type model|kernel]
Each option also reads an environment variable: KERNHUB_CLI, KERNHUB_INTEROP_SO,
KERNHUB_MAKE_HUB, KERNHUB_HUB_SERVER, KERNHUB_DEMO_HUB, KERNHUB_PYTHON.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
import urllib.request
from pathlib import Path

SKIP_CODE = 77
STEP_TIMEOUT = 60
MODEL_REPO = "kernhub-interop/vector-add-model"
KERNEL_REPO = "kernhub-interop/vector-add"
SO_NAME = "libvector_add.so"
HEADER = "include/vector_add.h"


# ---- reporting ---------------------------------------------------------------

class Report:
    """Counts checks; every check prints exactly one PASS or FAIL line."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS: {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL: {what}" + (f" -- {detail}" if detail else ""), flush=True)
        return ok

    def equal(self, got, want, what):
        return self.check(got == want, what, f"got {got!r}, want {want!r}")

    @staticmethod
    def info(text):
        print(f"INFO: {text}", flush=True)

    @staticmethod
    def diff(text):
        print(f"DIFF: {text}", flush=True)


def kernel_type_support():
    """Whether this huggingface_hub accepts repo_type="kernel" for downloads and scans."""
    from huggingface_hub import constants

    download_types = getattr(constants, "REPO_TYPES_WITH_KERNEL", constants.REPO_TYPES)
    return {
        "REPO_TYPES": list(constants.REPO_TYPES),
        "REPO_TYPES_WITH_KERNEL": getattr(constants, "REPO_TYPES_WITH_KERNEL", None),
        "download": "kernel" in download_types,
        "url_prefix": constants.REPO_TYPES_URL_PREFIXES.get("kernel"),
        "scan": scan_knows_kernels(),
    }


def scan_knows_kernels():
    """Whether scan_cache_dir accepts a "kernels--" folder: probed on a minimal
    hand-made one, since some versions (1.10-1.x) know repo_type "kernel" for
    downloads but scan against a fixed set of types."""
    from huggingface_hub import scan_cache_dir

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-probe-") as probe:
        (Path(probe) / "kernels--probe--probe" / "snapshots").mkdir(parents=True)
        return not scan_cache_dir(probe).warnings


def folder_name(repo):
    return ("kernels--" if repo["type"] == "kernel" else "models--") + repo["repo_id"].replace("/", "--")


# ---- child phases (run with the huggingface_hub environment set) -------------

def phase_offline(ctx, report):
    """(a), (b), (c) against the kernhub-filled cache, HF_HUB_OFFLINE=1."""
    import huggingface_hub
    from huggingface_hub import constants

    try:
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # before huggingface_hub 0.23
        from huggingface_hub.utils import LocalEntryNotFoundError

    cache = ctx["cache"]
    support = kernel_type_support()
    report.check(constants.HF_HUB_OFFLINE, "huggingface_hub sees HF_HUB_OFFLINE=1")
    report.equal(os.path.realpath(constants.HF_HUB_CACHE), os.path.realpath(cache),
                 "huggingface_hub resolves HF_HUB_CACHE to the kernhub cache")

    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            report.info(f"{label}: this huggingface_hub has no repo_type 'kernel' for downloads; skipping (a) for it")
            continue
        snapshot = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"])
        for f in repo["files"]:
            want_bytes = Path(f["source"]).read_bytes()
            for revision in ("main", repo["commit"]):
                what = f"(a) {label}: hf_hub_download({f['path']!r}, revision={revision[:12]!r}, local_files_only)"
                try:
                    got = huggingface_hub.hf_hub_download(
                        repo["repo_id"], filename=f["path"], repo_type=repo["type"], revision=revision,
                        cache_dir=cache, local_files_only=True)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    report.check(False, what, f"{type(e).__name__}: {e}")
                    continue
                want_path = os.path.join(snapshot, f["path"])
                report.check(got == want_path and Path(got).read_bytes() == want_bytes,
                             what + " returns the snapshot path with the original bytes",
                             f"returned {got!r} (want {want_path!r}), bytes equal: "
                             f"{os.path.exists(got) and Path(got).read_bytes() == want_bytes}")
        so = next(f for f in repo["files"] if f["path"].endswith(SO_NAME))
        got = huggingface_hub.try_to_load_from_cache(repo["repo_id"], so["path"], revision="main",
                                                     repo_type=repo["type"])
        report.equal(got, os.path.join(snapshot, so["path"]),
                     f"(a) {label}: try_to_load_from_cache (cache from HF_HUB_CACHE) finds the .so")
        try:
            got = huggingface_hub.snapshot_download(
                repo["repo_id"], repo_type=repo["type"], revision="main", local_files_only=True,
                allow_patterns=[f"build/{ctx['variant']}/*"])
            report.equal(os.path.realpath(got), os.path.realpath(snapshot),
                         f"(a) {label}: snapshot_download(local_files_only) returns kernhub's snapshot")
        except Exception as e:  # noqa: BLE001
            report.check(False, f"(a) {label}: snapshot_download(local_files_only)", f"{type(e).__name__}: {e}")
        # A file kernhub did not fetch must be reported missing: proves the
        # answers above came from the cache, not from anywhere else.
        try:
            huggingface_hub.hf_hub_download(repo["repo_id"], filename="README.md", repo_type=repo["type"],
                                            revision="main", cache_dir=cache, local_files_only=True)
            report.check(False, f"(a) {label}: a file kernhub did not fetch is missing offline", "README.md was found")
        except LocalEntryNotFoundError:
            report.check(True, f"(a) {label}: a file kernhub did not fetch is missing offline (LocalEntryNotFoundError)")

    # (b) and (c): scan_cache_dir.
    try:
        info = huggingface_hub.scan_cache_dir(cache)
    except Exception as e:  # noqa: BLE001
        report.check(False, "(b) scan_cache_dir(kernhub cache) does not raise", f"{type(e).__name__}: {e}")
        return
    report.check(True, "(b) scan_cache_dir(kernhub cache) does not raise")
    for w in info.warnings:
        report.info(f"scan_cache_dir warning: {w}")
    kernel_warnings = [w for w in info.warnings if "kernels--" in str(w)]
    other_warnings = [w for w in info.warnings if "kernels--" not in str(w)]
    if support["scan"]:
        report.equal([str(w) for w in info.warnings], [], "(b) scan_cache_dir reports no warnings")
    else:
        report.equal([str(w) for w in other_warnings], [], "(b) scan_cache_dir reports no warnings but for kernels--")
        report.info(f"(c) this huggingface_hub does not know 'kernels--' folders; its warnings: "
                    f"{[str(w) for w in kernel_warnings]}")
    incomplete = getattr(info, "incomplete_files", frozenset())
    report.equal(sorted(str(f.file_path) for f in incomplete), [], "(b) scan_cache_dir finds no incomplete files")
    by_id = {(r.repo_type, r.repo_id): r for r in info.repos}
    total = 0
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        step = "(c)" if repo["type"] == "kernel" else "(b)"
        if repo["type"] == "kernel" and not support["scan"]:
            report.check(("kernel", repo["repo_id"]) not in by_id,
                         f"{step} {label}: left out of scan_cache_dir's repos (no 'kernels' repo type here)")
            continue
        cached = by_id.get((repo["type"], repo["repo_id"]))
        if not report.check(cached is not None, f"{step} {label}: listed with repo_type {repo['type']!r}",
                            f"listed: {sorted(by_id)}"):
            continue
        folder = Path(os.path.realpath(cache)) / folder_name(repo)
        report.equal(cached.repo_path, folder, f"{step} {label}: repo_path is {folder.name}")
        revs = sorted(cached.revisions, key=lambda r: r.commit_hash)
        report.equal([r.commit_hash for r in revs], [repo["commit"]], f"{step} {label}: one revision, the fetched commit")
        if not revs:
            continue
        rev = revs[0]
        report.equal(set(rev.refs), {"main"}, f"{step} {label}: the revision's refs are {{'main'}}")
        want_files = {f["path"]: f for f in repo["files"]}
        got_files = {f.file_path.relative_to(rev.snapshot_path).as_posix(): f for f in rev.files}
        report.equal(sorted(got_files), sorted(want_files), f"{step} {label}: the revision lists the variant's files")
        blob_dir = folder / "blobs"
        wrong = [p for p, f in got_files.items() if p in want_files and
                 (f.blob_path != blob_dir / want_files[p]["etag"] or f.size_on_disk != want_files[p]["size"])]
        report.equal(wrong, [], f"{step} {label}: each file's blob_path is blobs/<etag> with the file's size")
        etags = {f["etag"]: f["size"] for f in repo["files"]}
        report.equal(cached.nb_files, len(etags), f"{step} {label}: nb_files counts the distinct blobs")
        report.equal(cached.size_on_disk, sum(etags.values()), f"{step} {label}: size_on_disk is the blobs' total")
        report.equal(rev.size_on_disk, sum(etags.values()), f"{step} {label}: the revision's size_on_disk")
        total += cached.size_on_disk
    if support["scan"]:
        report.equal(info.size_on_disk, total, "(b) the cache's size_on_disk is the repos' total")


def phase_download(ctx, report):
    """(d): huggingface_hub itself downloads the same files from the hub into a fresh cache."""
    import huggingface_hub

    cache = ctx["cache"]
    support = kernel_type_support()
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            report.info(f"{label}: no repo_type 'kernel' in this huggingface_hub; not downloading it")
            continue
        snapshot = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"])
        for f in repo["files"]:
            what = f"(d) {label}: hf_hub_download({f['path']!r}, revision='main') from the test hub"
            try:
                got = huggingface_hub.hf_hub_download(repo["repo_id"], filename=f["path"], repo_type=repo["type"],
                                                      revision="main", cache_dir=cache)
            except Exception as e:  # noqa: BLE001
                report.check(False, what, f"{type(e).__name__}: {e}")
                continue
            want = os.path.join(snapshot, f["path"])
            report.check(got == want and Path(got).read_bytes() == Path(f["source"]).read_bytes(), what,
                         f"returned {got!r}, want {want!r}")


def phase_refresh(ctx, report):
    """(d2): huggingface_hub online over a kernhub-filled cache: a plain call reuses
    kernhub's files; force_download replaces a read-only kernhub blob under
    kernhub's lock file."""
    import huggingface_hub

    cache = ctx["cache"]
    support = kernel_type_support()
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            continue
        so = next(f for f in repo["files"] if f["path"].endswith(SO_NAME))
        want = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"], so["path"])
        for force in (False, True):
            what = f"(d2) {label}: online hf_hub_download(.so, force_download={force}) over kernhub's cache"
            try:
                got = huggingface_hub.hf_hub_download(repo["repo_id"], filename=so["path"], repo_type=repo["type"],
                                                      revision="main", cache_dir=cache, force_download=force)
            except Exception as e:  # noqa: BLE001
                report.check(False, what, f"{type(e).__name__}: {e}")
                continue
            report.check(got == want and Path(got).read_bytes() == Path(so["source"]).read_bytes(), what,
                         f"returned {got!r}, want {want!r}")


def phase_delete(ctx, report):
    """(e): huggingface_hub deletes kernhub's revisions (what `hf cache delete` does)."""
    import huggingface_hub

    cache = ctx["cache"]
    info = huggingface_hub.scan_cache_dir(cache)
    wanted = {(r["type"], r["repo_id"]): r["commit"] for r in ctx["repos"]}
    commits = [rev.commit_hash for repo in info.repos if (repo.repo_type, repo.repo_id) in wanted
               for rev in repo.revisions]
    if not report.check(bool(commits), "(e) scan_cache_dir finds kernhub revisions to delete"):
        return
    strategy = info.delete_revisions(*commits)
    report.info(f"delete_revisions would free {strategy.expected_freed_size} bytes")
    try:
        strategy.execute()
    except Exception as e:  # noqa: BLE001
        report.check(False, "(e) delete_revisions(...).execute() on the kernhub cache", f"{type(e).__name__}: {e}")
        return
    after = huggingface_hub.scan_cache_dir(cache)
    left = [(r.repo_type, r.repo_id) for r in after.repos if (r.repo_type, r.repo_id) in wanted]
    report.equal(left, [], "(e) delete_revisions(...).execute() removes kernhub's repos")
    known = [r for r in ctx["repos"] if r["type"] != "kernel" or kernel_type_support()["scan"]]
    leftovers = sorted(str(p.relative_to(cache)) for r in known for p in Path(cache).glob(f"{folder_name(r)}/blobs/*"))
    report.equal(leftovers, [], "(e) no blob of a deleted repo is left behind")


PHASES = {"offline": phase_offline, "download": phase_download, "refresh": phase_refresh, "delete": phase_delete}


def run_phase(name, ctx_path):
    report = Report()
    ctx = json.loads(Path(ctx_path).read_text())
    try:
        PHASES[name](ctx, report)
    except Exception:  # noqa: BLE001 - report, do not hide
        traceback.print_exc()
        report.check(False, f"phase {name} ran to the end", "it raised (traceback above)")
    print(f"PHASE-RESULT: {json.dumps({'passed': report.passed, 'failed': report.failed})}", flush=True)
    return 1 if report.failed else 0


# ---- parent: hub, kernhub, comparisons ---------------------------------------

def host_variant():
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"native-cpu-{machine}-linux"


def clean_env(**extra):
    """The environment minus anything that could steer kernhub or huggingface_hub elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KERNHUB_", "KERNELS_", "HUGGINGFACE_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({"NO_PROXY": "127.0.0.1,127.0.0.2,localhost", "no_proxy": "127.0.0.1,127.0.0.2,localhost",
                "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "HF_HUB_DISABLE_XET": "1"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


class HubServer:
    def __init__(self, python, script, root):
        self.proc = subprocess.Popen([python, script, "--root", str(root)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            raise RuntimeError(f"hub_server.py exited with {self.proc.returncode} before its ready line")
        ready = json.loads(line)
        self.endpoint, self.cdn = ready["endpoint"], ready["cdn"]

    def control(self, path, data=None):
        req = urllib.request.Request(self.endpoint + path, data=data, method="POST" if data is not None else "GET")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        with opener.open(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the server exits at EOF on stdin
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def make_spec(so_path, variant):
    header = "#pragma once\n#include <stddef.h>\n" \
             "void kh_vector_add(const float* a, const float* b, float* out, size_t n);\n"

    def files(kind):
        return {
            "README.md": {"text": f"# {kind} repo for the huggingface_hub interop test\n"},
            f"build/{variant}/{SO_NAME}": {"path": str(so_path), "lfs": True},
            f"build/{variant}/{HEADER}": {"text": header},
        }

    return {"repos": [
        {"repo_id": MODEL_REPO, "type": "model", "commits": [
            {"message": "first", "tags": ["v0.1"], "files": {"README.md": {"text": "old\n"}}},
            {"message": "vector-add as a model repo", "branches": ["main"], "metadata": True,
             "files": files("model")}]},
        {"repo_id": KERNEL_REPO, "type": "kernel", "commits": [
            {"message": "vector-add", "branches": ["main", "v1"], "metadata": True, "files": files("kernel")}]},
    ]}


def expected_repos(hub_dir, variant):
    """Commit of main and each variant file's etag, size and source bytes, from the hub index."""
    index = json.loads((hub_dir / "_hub.json").read_text())["repos"]
    repos = []
    for repo_id in (MODEL_REPO, KERNEL_REPO):
        entry = index[repo_id]
        commit = entry["branches"]["main"]
        prefix = "kernels/" if entry["type"] == "kernel" else ""
        files = []
        for e in entry["trees"][commit]:
            if e["type"] == "file" and e["path"].startswith(f"build/{variant}/"):
                files.append({"path": e["path"], "size": e["size"],
                              "etag": e["lfs"]["oid"] if "lfs" in e else e["oid"], "lfs": "lfs" in e,
                              "source": str(hub_dir / f"{prefix}{repo_id}" / "resolve" / commit / e["path"])})
        repos.append({"repo_id": repo_id, "type": entry["type"], "commit": commit, "files": files})
    return repos


def run(cmd, env, what, report):
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        report.check(False, what, f"timed out after {STEP_TIMEOUT}s: {cmd}")
        return None
    except OSError as e:
        report.check(False, what, f"cannot run {cmd[0]}: {e}")
        return None
    return p


def kernhub_fetch(args, report, name, repo, cache, server, registry, variant, workdir):
    cmd = [args.kernhub, "fetch", name, "--registry", str(registry), "--endpoint", server.endpoint,
           "--cache-dir", str(cache), "--target", variant, "--json", "--quiet"]
    env = clean_env(HOME=workdir, HF_HOME=workdir / "hf-home")
    what = f"kernhub fetch {name} ({repo['type']} repo {repo['repo_id']}) exits 0 with JSON"
    p = run(cmd, env, what, report)
    if p is None:
        return False
    try:
        out = json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        out = None
    if not report.check(out is not None, what, f"exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}"):
        return False
    report.equal(out.get("commit"), repo["commit"], f"kernhub fetch {name}: commit is main's")
    report.equal(out.get("variant"), variant, f"kernhub fetch {name}: variant")
    prefix = f"build/{variant}/"
    want = sorted((f["path"][len(prefix):], f["size"]) for f in repo["files"])
    got = sorted((f.get("path"), f.get("size")) for f in out.get("files", []))
    report.equal(got, want, f"kernhub fetch {name}: files and sizes are the variant's")
    return True


def tree_entries(root):
    """Relative path -> ('link', target) | ('file', bytes) | ('dir',) for everything under root."""
    result = {}
    if not root.exists():
        return result
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                result[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                result[rel] = ("dir",)
            else:
                result[rel] = ("file", p.read_bytes())
    return result


def describe(entry):
    if entry is None:
        return "absent"
    if entry[0] == "file":
        return f"file of {len(entry[1])} bytes (sha256 {hashlib.sha256(entry[1]).hexdigest()[:12]})"
    return " ".join(map(str, entry))


def compare_layouts(report, repo, kern_cache, hf_cache):
    """(d): kernhub's blobs/, snapshots/ and refs/ against huggingface_hub's for the same files."""
    label = f"{repo['type']} repo {repo['repo_id']}"
    folder = folder_name(repo)
    k_repo, h_repo = kern_cache / folder, hf_cache / folder
    for sub in ("blobs", "snapshots", "refs"):
        k, h = tree_entries(k_repo / sub), tree_entries(h_repo / sub)
        report.check(sorted(k) == sorted(h), f"(d) {label}: {sub}/ holds the same entries in both caches",
                     f"only kernhub has {sorted(set(k) - set(h))}, only huggingface_hub has {sorted(set(h) - set(k))}")
        differing = [p for p in sorted(set(k) & set(h)) if k[p] != h[p]]
        report.check(not differing, f"(d) {label}: every {sub}/ entry is byte-for-byte the same",
                     "; ".join(f"{sub}/{p}: kernhub {describe(k[p])} vs huggingface_hub {describe(h[p])}"
                               for p in differing))
    for f in repo["files"]:
        link = Path("snapshots") / repo["commit"] / f["path"]
        k_target = os.readlink(k_repo / link) if (k_repo / link).is_symlink() else None
        h_target = os.readlink(h_repo / link) if (h_repo / link).is_symlink() else None
        report.check(k_target is not None and k_target == h_target
                     and os.path.basename(k_target) == f["etag"],
                     f"(d) {label}: {f['path']} -> {k_target} (blob named by the {'LFS sha256' if f['lfs'] else 'git sha1'})",
                     f"kernhub {k_target!r}, huggingface_hub {h_target!r}, etag {f['etag']}")
    k_ref, h_ref = k_repo / "refs" / "main", h_repo / "refs" / "main"
    report.check(k_ref.is_file() and h_ref.is_file() and k_ref.read_bytes() == h_ref.read_bytes()
                 == repo["commit"].encode(), f"(d) {label}: refs/main is the bare commit in both",
                 f"kernhub {k_ref.read_bytes() if k_ref.is_file() else None!r}, "
                 f"huggingface_hub {h_ref.read_bytes() if h_ref.is_file() else None!r}")

    # Facts that differ by design or do not matter to readers: reported, not failed.
    for f in repo["files"]:
        kb, hb = k_repo / "blobs" / f["etag"], h_repo / "blobs" / f["etag"]
        if kb.exists() and hb.exists():
            km, hm = stat.S_IMODE(kb.stat().st_mode), stat.S_IMODE(hb.stat().st_mode)
            if km != hm:
                report.diff(f"{label}: blobs/{f['etag'][:12]}… mode kernhub {km:o}, huggingface_hub {hm:o}")
    k_top = sorted(p.name for p in k_repo.iterdir())
    h_top = sorted(p.name for p in h_repo.iterdir())
    if k_top != h_top:
        report.diff(f"{label}: repo folder entries kernhub {k_top}, huggingface_hub {h_top}")
    k_locks = sorted(p.name for p in (kern_cache / ".locks" / folder).glob("*"))
    h_locks = sorted(p.name for p in (hf_cache / ".locks" / folder).glob("*"))
    if k_locks != h_locks:
        report.diff(f"{label}: .locks/{folder}/ kernhub {k_locks}, huggingface_hub {h_locks}")


def run_child(report, phase, ctx, workdir, env):
    ctx_path = workdir / f"{phase}.json"
    ctx_path.write_text(json.dumps(ctx))
    cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--context", str(ctx_path)]
    p = run(cmd, env, f"phase {phase}", report)
    if p is None:
        return
    sys.stdout.write(p.stdout.replace("PHASE-RESULT:", "phase result:"))
    if p.stderr.strip():
        print(f"--- stderr of phase {phase} ---\n{p.stderr.rstrip()}\n---", flush=True)
    counts = None
    for line in p.stdout.splitlines():
        if line.startswith("PHASE-RESULT: "):
            counts = json.loads(line[len("PHASE-RESULT: "):])
    if counts is None:
        report.check(False, f"phase {phase} reported its results", f"exit {p.returncode}")
        return
    report.passed += counts["passed"]
    report.failed += counts["failed"]
    if p.returncode != 0 and counts["failed"] == 0:
        report.check(False, f"phase {phase} exits 0", f"exit {p.returncode}")


def requests_since_reset(server):
    return [f"{r['host']} {r['method']} {r['path']} -> {r['status']}" for r in server.control("/_stats")["requests"]]


def main_check(args):
    # The skip comes before any check: a skipped run checked nothing.
    try:
        import huggingface_hub
    except ImportError:
        print(f"SKIPPED: huggingface_hub is not installed for {sys.executable} "
              "(tests/run.sh installs tests/requirements.txt into build/venv)", flush=True)
        return SKIP_CODE
    report = Report()
    support = kernel_type_support()
    report.info(f"huggingface_hub {huggingface_hub.__version__} at {os.path.dirname(huggingface_hub.__file__)}")
    report.info(f"constants.REPO_TYPES = {support['REPO_TYPES']}; REPO_TYPES_WITH_KERNEL = "
                f"{support['REPO_TYPES_WITH_KERNEL']}; kernel URL prefix {support['url_prefix']!r}; "
                f"scan_cache_dir accepts kernels-- folders: {support['scan']}")
    report.info(f"repo_type 'kernel' supported for downloads: {support['download']}")
    if args.repo_type == "kernel" and not support["download"]:
        print(f"SKIPPED: huggingface_hub {huggingface_hub.__version__} has no repo_type 'kernel' for downloads, "
              "so it cannot read a kernel repo from the cache", flush=True)
        return SKIP_CODE

    variant = host_variant()
    for path, what in ((args.kernhub, "--kernhub"), (args.so, "--so"), (args.make_hub, "--make-hub"),
                       (args.hub_server, "--hub-server")):
        if not path or not os.path.isfile(path):
            report.check(False, f"input {what} exists", f"{path!r}")
            return 1
    if args.demo_hub and os.path.isfile(os.path.join(args.demo_hub, "_hub.json")):
        report.info(f"demo hub {args.demo_hub} present (this test lays out its own hub with a model repo)")

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        hub_dir, kern_cache, hf_cache = workdir / "hub", workdir / "cache-kernhub", workdir / "cache-hf"
        spec = workdir / "spec.json"
        spec.write_text(json.dumps(make_spec(os.path.abspath(args.so), variant), indent=1))
        p = run([args.python, args.make_hub, "--spec", str(spec), "--out", str(hub_dir)], clean_env(),
                "make_hub.py", report)
        if not report.check(p is not None and p.returncode == 0, f"make_hub.py lays out the hub ({variant})",
                            p and p.stderr):
            return 1
        repos = [r for r in expected_repos(hub_dir, variant) if args.repo_type in (None, r["type"])]
        registry = workdir / "registry.json"
        names = {MODEL_REPO: "interop-model", KERNEL_REPO: "interop-kernel"}
        registry.write_text(json.dumps({"format": 1, "kernels": {
            names[r["repo_id"]]: {"repo_id": r["repo_id"], "repo_type": r["type"], "revision": "main",
                                  "symbol": "kh_vector_add", "file": SO_NAME} for r in repos}}))

        server = HubServer(args.python, args.hub_server, hub_dir)
        try:
            report.info(f"hub at {server.endpoint}, LFS CDN at {server.cdn}")
            fetched = [r for r in repos
                       if kernhub_fetch(args, report, names[r["repo_id"]], r, kern_cache, server, registry,
                                        variant, workdir)]
            if len(fetched) != len(repos):
                return 1

            hf_home = workdir / "hf-home"
            server.control("/_reset", b"{}")
            offline_env = clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_CACHE=kern_cache, HF_HUB_OFFLINE=1,
                                    HF_ENDPOINT=server.endpoint)
            run_child(report, "offline", {"cache": str(kern_cache), "repos": repos, "variant": variant},
                      workdir, offline_env)
            made = requests_since_reset(server)
            report.equal(made, [], "(a) huggingface_hub made no request with HF_HUB_OFFLINE=1")

            server.control("/_reset", b"{}")
            online_env = clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_CACHE=hf_cache, HF_ENDPOINT=server.endpoint)
            run_child(report, "download", {"cache": str(hf_cache), "repos": repos, "variant": variant},
                      workdir, online_env)
            for line in requests_since_reset(server):
                report.info(f"huggingface_hub request: {line}")

            refresh_cache = workdir / "cache-refresh"
            shutil.copytree(kern_cache, refresh_cache, symlinks=True)
            server.control("/_reset", b"{}")
            run_child(report, "refresh", {"cache": str(refresh_cache), "repos": repos, "variant": variant},
                      workdir, clean_env(HOME=workdir, HF_HOME=hf_home, HF_ENDPOINT=server.endpoint))
            for line in requests_since_reset(server):
                report.info(f"huggingface_hub request over kernhub's cache: {line}")
            for repo in repos:
                if repo["type"] == "kernel" and not support["download"]:
                    continue
                compare_layouts(report, repo, kern_cache, hf_cache)
            tags = [c / "CACHEDIR.TAG" for c in (kern_cache, hf_cache)]
            first_lines = [t.read_text().splitlines()[0] if t.is_file() else None for t in tags]
            report.info(f"CACHEDIR.TAG first line: kernhub {first_lines[0]!r}, huggingface_hub {first_lines[1]!r}")

            # The other direction: kernhub offline over the cache huggingface_hub
            # filled (no .kernhub/ side data there) rebuilds the listing from
            # the snapshot links and re-verifies every blob against its name.
            for repo in repos:
                if repo["type"] == "kernel" and not support["download"]:
                    continue
                cmd = [args.kernhub, "fetch", names[repo["repo_id"]], "--registry", str(registry), "--offline",
                       "--cache-dir", str(hf_cache), "--target", variant, "--json", "--quiet"]
                p = run(cmd, clean_env(HOME=workdir, HF_HOME=hf_home), "kernhub fetch --offline", report)
                label = f"(d) kernhub fetch --offline {names[repo['repo_id']]} over huggingface_hub's cache"
                if p is None or p.returncode != 0:
                    report.check(False, label, p.stderr.strip()[:300] if p is not None else "did not run")
                    continue
                out = json.loads(p.stdout)
                report.check(out["requests"] == 0 and out["bytes_downloaded"] == 0 and out["variant"] == variant,
                             f"{label}: exit 0, no request, variant {variant}", json.dumps(out)[:300])
        finally:
            server.close()

        delete_cache = workdir / "cache-delete"
        shutil.copytree(kern_cache, delete_cache, symlinks=True)
        run_child(report, "delete", {"cache": str(delete_cache), "repos": repos, "variant": variant},
                  workdir, clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_OFFLINE=1))

    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 1 if report.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    env = os.environ.get
    parser.add_argument("--kernhub", default=env("KERNHUB_CLI"), help="the kernhub CLI")
    parser.add_argument("--so", default=env("KERNHUB_INTEROP_SO"), help="a real shared object to publish")
    parser.add_argument("--make-hub", default=env("KERNHUB_MAKE_HUB"), help="examples/hub/make_hub.py")
    parser.add_argument("--hub-server", default=env("KERNHUB_HUB_SERVER"), help="tests/support/hub_server.py")
    parser.add_argument("--demo-hub", default=env("KERNHUB_DEMO_HUB"), help="the demo hub tree (informational)")
    parser.add_argument("--python", default=env("KERNHUB_PYTHON") or sys.executable,
                        help="Python for make_hub.py and hub_server.py")
    parser.add_argument("--repo-type", choices=("model", "kernel"),
                        help="check only the model or only the kernel repo (default: both)")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--context", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("kernhub", "so", "make_hub", "hub_server"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    if args.phase:
        return run_phase(args.phase, args.context)
    return main_check(args)


if __name__ == "__main__":
    sys.exit(main())
