#!/usr/bin/env python3
"""Interop: kernhub cache ls | verify | prune | path over a cache that the
real huggingface_hub filled.

Lays out a hub with examples/hub/make_hub.py (a kernel repo with the host's
native-cpu variant: a .so in LFS, a plain header and metadata.json, plus a
README; and a model repo with one plain file), serves it with
tests/support/hub_server.py, and lets huggingface_hub fill a cache with
snapshot_download (the kernel variant) and hf_hub_download (the README and
the model file). Then:

  (1) cache ls --json shows both repos, the ref, the commit, the variant with
      its files and sizes, and that kernhub has no record of it;
  (2) cache verify finds nothing wrong (exit 0);
  (3) cache path REPO prints huggingface_hub's own snapshot folder of the
      variant, offline, and writes nothing;
  (4) a flipped byte in a blob huggingface_hub wrote is exit 4 naming it;
      --repair removes it, a kernhub fetch gets it again, and
      huggingface_hub reads the repaired cache offline;
  (5) prune keeps everything refs/main names (huggingface_hub's refs), removes
      an unreferenced old blob, and huggingface_hub still reads the cache
      offline afterwards.

Options, output and exit status as interop_support.py describes; skipped
(77) when huggingface_hub is missing or lacks repo_type "kernel".
"""

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import interop_support as support
from interop_support import clean_env, kernhub, run_python

REPO = "kernhub-interop/manage"
MODEL = "kernhub-interop/model"
FOLDER = "kernels--kernhub-interop--manage"
HEADER = "include/vector_add.h"


def tree(path):
    """Every entry below path with its modification time (links not followed)."""
    return sorted((str(p.relative_to(path)), os.lstat(p).st_mtime_ns) for p in path.rglob("*"))


def age(path, hours):
    """Back-dates path and everything below it, links themselves included."""
    when = time.time() - hours * 3600
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def main():
    args = support.parse_args(support.argument_parser())
    why = support.hf_missing()
    if why:
        return support.skipped(why)

    report = support.Report()
    variant = support.host_variant()
    with tempfile.TemporaryDirectory(prefix="kernhub-hf-manage-") as tmp:
        tmp = Path(tmp)
        spec = {"repos": [
            {"repo_id": REPO, "type": "kernel", "commits": [{
                "message": "build", "branches": ["main"], "metadata": True, "files": {
                    "README.md": {"text": "cache management interop\n"},
                    f"build/{variant}/libvector_add.so": {"path": str(Path(args.so).resolve()), "lfs": True},
                    f"build/{variant}/{HEADER}": {"text": "#pragma once\n"},
                    "build/native-cu128-x86_64-linux/libvector_add.so": {"text": "not cuda", "lfs": True},
                }}]},
            {"repo_id": MODEL, "type": "model", "commits": [{
                "message": "weights", "branches": ["main"], "files": {"config.json": {"text": "{}\n"}}}]},
        ]}
        with support.served_hub(args, spec, tmp / "hub") as (server, index):
            run_checks(report, args, tmp, server.endpoint, index["repos"][REPO]["branches"]["main"], variant)
    return report.finish()


def run_checks(report, args, tmp, endpoint, commit, variant):
    cache = tmp / "hf-cache"
    fill = (f"import huggingface_hub as h\n"
            f"h.snapshot_download({REPO!r}, repo_type='kernel', allow_patterns=['build/{variant}/*'])\n"
            f"h.hf_hub_download({REPO!r}, 'README.md', repo_type='kernel')\n"
            f"h.hf_hub_download({MODEL!r}, 'config.json')\n")
    hf_env = clean_env(HF_HUB_CACHE=cache, HF_ENDPOINT=endpoint, HF_HOME=tmp / "hf-home")
    p = run_python(fill, hf_env)
    if not report.check(p.returncode == 0, "huggingface_hub fills a cache from the test hub", p.stderr[-2000:]):
        return
    offline_hf_env = clean_env(HF_HUB_CACHE=cache, HF_HUB_OFFLINE=1, HF_HOME=tmp / "hf-home")
    read_back = (f"import huggingface_hub as h, pathlib\n"
                 f"d = h.snapshot_download({REPO!r}, repo_type='kernel', allow_patterns=['build/{variant}/*'], "
                 f"local_files_only=True)\n"
                 f"print(pathlib.Path(d, 'build', {variant!r}, 'libvector_add.so').read_bytes().hex()[:64])\n")
    kh_env = clean_env(HF_HOME=tmp / "kh-home", KERNHUB_ENDPOINT="http://127.0.0.1:9")
    snapshot = cache / FOLDER / "snapshots" / commit
    variant_dir = snapshot / "build" / variant

    # (1)
    r = kernhub(args.kernhub, ["cache", "ls", "--json", "--cache-dir", str(cache)], kh_env)
    ls = json.loads(r.stdout) if r.returncode == 0 else {}
    repos = {repo["repo_id"]: repo for repo in ls.get("repos", [])}
    report.check(r.returncode == 0 and sorted(repos) == [REPO, MODEL], "(1) cache ls lists both repos",
                 f"exit {r.returncode}: {r.stderr} {sorted(repos)}")
    kernel = repos.get(REPO, {})
    so_size = Path(args.so).stat().st_size
    header_size = len("#pragma once\n")
    meta_size = (variant_dir / "metadata.json").stat().st_size
    variant_entry = {"name": variant, "files": 3, "size": so_size + header_size + meta_size, "recorded": False,
                     "part": None}
    commits = kernel.get("commits", [])
    report.check(kernel.get("repo_type") == "kernel" and kernel.get("refs") == {"main": commit},
                 "(1) the kernel repo's ref main names the commit", json.dumps(kernel)[:1000])
    report.check(len(commits) == 1 and commits[0]["commit"] == commit and commits[0]["refs"] == ["main"]
                 and commits[0]["files"] == 4 and commits[0]["variants"] == [variant_entry],
                 "(1) one commit: the variant's three files with their sizes, not recorded by kernhub, and README",
                 json.dumps(commits)[:1000])
    report.check(kernel.get("blobs") == 4 and kernel.get("partials") == 0
                 and kernel.get("size") == variant_entry["size"] + len("cache management interop\n"),
                 "(1) four blobs and their total size", json.dumps(kernel)[:1000])
    report.check(repos.get(MODEL, {}).get("repo_type") == "model", "(1) the model repo is a model repo")

    # (2)
    r = kernhub(args.kernhub, ["cache", "verify", "--json", "--cache-dir", str(cache)], kh_env)
    out = json.loads(r.stdout) if r.stdout else {}
    report.check(r.returncode == 0 and out.get("problems") == [] and out.get("blobs_checked") == 5
                 and out.get("links_checked") == 5, "(2) cache verify: nothing wrong, 5 blobs and 5 links",
                 f"exit {r.returncode}: {r.stdout[:1000]} {r.stderr}")

    # (3)
    before = tree(cache)
    r = kernhub(args.kernhub, ["cache", "path", REPO, "--cache-dir", str(cache)], kh_env)
    report.check(r.returncode == 0 and r.stdout == f"{variant_dir}\n",
                 "(3) cache path names huggingface_hub's snapshot folder of the variant",
                 f"exit {r.returncode}: {r.stdout} {r.stderr}")
    report.check(tree(cache) == before, "(3) cache path wrote nothing")

    # (4)
    blob = (variant_dir / "libvector_add.so").resolve()
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF
    os.chmod(blob, 0o644)
    blob.write_bytes(bytes(data))
    r = kernhub(args.kernhub, ["cache", "verify", "--cache-dir", str(cache)], kh_env)
    report.check(r.returncode == 4 and f"{blob}: content does not match its name" in r.stdout
                 and blob.name in r.stderr, "(4) a flipped byte is exit 4 naming the blob",
                 f"exit {r.returncode}: {r.stdout} {r.stderr}")
    r = kernhub(args.kernhub, ["cache", "verify", "--repair", "--cache-dir", str(cache)], kh_env)
    report.check(r.returncode == 0 and not blob.exists() and not os.path.lexists(variant_dir / "libvector_add.so"),
                 "(4) --repair removes the blob and its link", f"exit {r.returncode}: {r.stdout} {r.stderr}")
    r = kernhub(args.kernhub, ["fetch", REPO, "--cache-dir", str(cache), "--endpoint", endpoint],
                clean_env(HF_HOME=tmp / "kh-home"))
    report.check(r.returncode == 0 and blob.read_bytes() == Path(args.so).read_bytes(),
                 "(4) a kernhub fetch gets the removed file again", f"exit {r.returncode}: {r.stderr}")
    p = run_python(read_back, offline_hf_env)
    expected_head = Path(args.so).read_bytes().hex()[:64]
    report.check(p.returncode == 0 and p.stdout.strip() == expected_head,
                 "(4) huggingface_hub reads the repaired cache offline", p.stderr[-1000:])

    # (5)
    stray = hashlib.sha256(b"nobody links me").hexdigest()
    (cache / FOLDER / "blobs" / stray).write_bytes(b"nobody links me")
    age(cache, 2)
    r = kernhub(args.kernhub, ["cache", "prune", "--json", "--cache-dir", str(cache)], kh_env)
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    report.check(r.returncode == 0 and out.get("removed") == [str(cache / FOLDER / "blobs" / stray)],
                 "(5) prune removes only the unreferenced blob", f"exit {r.returncode}: {r.stdout} {r.stderr}")
    p = run_python(read_back, offline_hf_env)
    report.check(p.returncode == 0 and p.stdout.strip() == expected_head,
                 "(5) huggingface_hub still reads the pruned cache offline", p.stderr[-1000:])
    r = kernhub(args.kernhub, ["cache", "verify", "--cache-dir", str(cache)], kh_env)
    report.check(r.returncode == 0, "(5) and cache verify finds nothing wrong", f"exit {r.returncode}: {r.stdout}")


if __name__ == "__main__":
    sys.exit(main())
