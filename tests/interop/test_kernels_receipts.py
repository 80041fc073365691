#!/usr/bin/env python3
"""Interop: kernhub's cache commands and fetch over the verification receipts kernels 0.19.1 wrote.

The hub (examples/hub/make_hub.py, served by tests/support/hub_server.py)
holds two kernel repos of a trusted organisation, kernhub-interop/kept and
kernhub-interop/dropped, each a pure-Python torch-universal variant with
branch v1 (also main). kernels 0.19.1 (in a child process, as in real use)
loads both into one cache and writes its receipts under
<cache>/.verified-kernels/. Then, on that cache:

- the receipts are where and what kernhub expects (the name this test
  computes on its own from the location, the location in the content);
- `kernhub cache ls` and `cache verify` report no damage; `cache prune` with
  nothing to prune keeps every receipt;
- `kernhub cache export` carries no receipt, and `cache import` of that
  archive with a receipt added is refused with exit 4 naming the receipts;
- once the refs of kernhub-interop/dropped are gone and its snapshot is old,
  `cache prune` removes that snapshot and its receipts, and keeps the other's;
- `kernhub fetch` of kernhub-interop/kept after one of its links is removed
  relinks it and removes its receipts; kernels then loads it offline
  (hashing it again, and writing a new receipt).

Usage: test_kernels_receipts.py --kernhub CLI --so LIB.so --make-hub make_hub.py --hub-server hub_server.py
Exit 77 (skipped) when this interpreter has no kernels 0.19.
"""

import hashlib
import json
import os
import struct
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import interop_support as support

TIMEOUT = 90
ORG = "kernhub-interop"
KEPT = f"{ORG}/kept"
DROPPED = f"{ORG}/dropped"
VARIANT = "torch-universal"
STORES = ("digest/v1", "signature/v1")


def package(repo):
    return (f"REPO = {repo!r}\n\n\n"
            f"def vector_add(a, b):\n"
            f"    return [x + y for x, y in zip(a, b)]\n")


def hub_spec():
    def repo(repo_id):
        return {"repo_id": repo_id, "type": "kernel",
                "commits": [{"message": "v1", "branches": ["v1", "main"], "metadata": True,
                             "metadata_extra": {"version": 1, "python-depends": []},
                             "files": {f"build/{VARIANT}/__init__.py": {"text": package(repo_id)}}}]}
    return {"organizations": {ORG: {"trusted_kernel_publisher": True}}, "repos": [repo(KEPT), repo(DROPPED)]}


LOAD = """
import json, sys
import kernels
module = kernels.get_kernel(sys.argv[1], version=1)
print(json.dumps({"file": module.__file__, "repo": module.REPO, "sum": module.vector_add([1, 2, 3], [10, 20, 30])}))
"""


def receipt_name(repo_id, commit, variant):
    """kernels 0.19.1's receipt name, computed here independently of kernhub."""
    framed = b"".join(struct.pack(">Q", len(part.encode())) + part.encode()
                      for part in ("remote_kernel", repo_id, commit, variant))
    return hashlib.sha256(framed).hexdigest()


def folder(cache, repo):
    return cache / ("kernels--" + repo.replace("/", "--"))


def commit_of(cache, repo):
    """The one snapshot kernels downloaded (it fetches by commit)."""
    snapshots = sorted(p.name for p in (folder(cache, repo) / "snapshots").iterdir())
    return snapshots[0] if len(snapshots) == 1 else None


def receipts_of(cache, repo, commit):
    name = receipt_name(repo, commit, VARIANT)
    return [cache / ".verified-kernels" / store / name for store in STORES]


def age(path, seconds):
    """Sets path and everything below it (links themselves) back by seconds."""
    when = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def load(report, tmp, cache, repo, what, **env):
    p = support.run_python(LOAD, support.kernels_env(tmp, HF_HUB_CACHE=cache, **env), repo, timeout=TIMEOUT)
    out = support.last_json(p.stdout) or {}
    ok = p.returncode == 0 and out.get("sum") == [11, 22, 33] and out.get("repo") == repo
    report.check(ok, what, f"{out}; {support.tail(p)}")
    return ok


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    args = support.parse_args(parser)
    try:
        from kernels._rust import DigestReceiptStore  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.19 ({e})")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    with tempfile.TemporaryDirectory(prefix="kernhub-receipts-") as name:
        tmp = Path(name)
        support.make_hub(args, hub_spec(), tmp / "hub", timeout=TIMEOUT)
        server = support.HubServer(args.python, args.hub_server, tmp / "hub")
        cache = tmp / "cache"
        try:
            run_checks(report, args, tmp, server, cache)
        finally:
            server.close()
    return report.finish()


def kh(args, *argv, **env):
    return support.kernhub(args.kernhub, list(argv), support.clean_env(**env), timeout=TIMEOUT)


def run_checks(report, args, tmp, server, cache):
    # Bytecode written, as a user's Python writes it: __pycache__/ lands in the snapshot.
    for repo in (KEPT, DROPPED):
        if not load(report, tmp, cache, repo, f"kernels 0.19.1 loads {repo} from the hub", HF_ENDPOINT=server.endpoint,
                    PYTHONDONTWRITEBYTECODE=""):
            return
    commits = {repo: commit_of(cache, repo) for repo in (KEPT, DROPPED)}
    bytecode = sorted(str(p.relative_to(cache)) for p in cache.glob("*/snapshots/*/build/*/__pycache__"))
    report.check(len(bytecode) == 2, "Python wrote __pycache__/ into each loaded variant's snapshot", str(bytecode))
    receipts = {repo: receipts_of(cache, repo, commit) for repo, commit in commits.items()}
    store = cache / ".verified-kernels"
    report.info(f"kernels wrote: {sorted(str(p.relative_to(cache)) for p in store.rglob('*') if p.is_file())}")
    digest = [receipts[repo][0] for repo in (KEPT, DROPPED)]
    report.check(all(p.is_file() for p in digest),
                 "kernels wrote a digest receipt per variant under .verified-kernels/digest/v1, named by the "
                 "SHA-256 of the length-prefixed location", str(digest))
    contents = [json.loads(p.read_text()) if p.is_file() else None for p in digest]
    report.equal(contents, [{"location": {"type": "remote_kernel", "repo_id": repo, "revision": commits[repo],
                                          "variant": VARIANT}} for repo in (KEPT, DROPPED)],
                 "each receipt's content names its location")
    present = {repo: [p for p in paths if p.exists()] for repo, paths in receipts.items()}

    ls = kh(args, "cache", "ls", "--cache-dir", str(cache), "--json")
    listed = json.loads(ls.stdout) if ls.returncode == 0 else {}
    report.check(ls.returncode == 0 and len(listed.get("repos", [])) == 2 and listed.get("leftovers") == 0,
                 "kernhub cache ls lists both repos and no leftover, receipts and all", support.tail(ls))
    verify = kh(args, "cache", "verify", "--cache-dir", str(cache), "--json")
    problems = json.loads(verify.stdout).get("problems") if verify.stdout.startswith("{") else None
    report.check(verify.returncode == 0 and problems == [], "kernhub cache verify reports no damage",
                 support.tail(verify))
    prune = kh(args, "cache", "prune", "--cache-dir", str(cache), "--json")
    pruned = json.loads(prune.stdout) if prune.returncode == 0 else {}
    report.check(prune.returncode == 0 and not any(".verified-kernels" in p for p in pruned.get("removed", []))
                 and all(p.exists() for paths in present.values() for p in paths),
                 "kernhub cache prune with nothing to prune keeps every receipt", support.tail(prune))

    archive = tmp / "cache.tar.gz"
    export = kh(args, "cache", "export", "--to", str(archive), "--cache-dir", str(cache), "--json")
    names = []
    if export.returncode == 0:
        with tarfile.open(archive) as tar:
            names = tar.getnames()
    report.check(export.returncode == 0 and names and not any(".verified-kernels" in n or "__pycache__" in n
                                                              for n in names),
                 "kernhub cache export carries no receipt, nor the bytecode Python wrote", support.tail(export))
    if names:
        bad = tmp / "with-receipt.tar"
        with tarfile.open(archive) as src, tarfile.open(bad, "w") as dst:
            for member in src.getmembers():
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
            dst.add(digest[0], arcname=f".verified-kernels/digest/v1/{digest[0].name}")
        target = tmp / "imported"
        imp = kh(args, "cache", "import", str(bad), "--cache-dir", str(target))
        report.check(imp.returncode == 4 and "verification receipts" in imp.stderr
                     and not (target / ".verified-kernels").exists(),
                     "kernhub cache import refuses an archive holding a receipt (exit 4), naming the receipts",
                     support.tail(imp))

    # The dropped repo: no ref names its snapshot any more, and it is old.
    refs = folder(cache, DROPPED) / "refs"
    report.info(f"refs of {DROPPED}: {sorted(p.name for p in refs.rglob('*')) if refs.exists() else 'none'}")
    for ref in (p for p in refs.rglob("*") if p.is_file()):
        ref.unlink()
    age(folder(cache, DROPPED), 7200)
    prune = kh(args, "cache", "prune", "--cache-dir", str(cache), "--json")
    removed = set(json.loads(prune.stdout).get("removed", [])) if prune.returncode == 0 else set()
    snapshot = folder(cache, DROPPED) / "snapshots" / commits[DROPPED]
    report.check(prune.returncode == 0 and not snapshot.exists()
                 and all(str(p) in removed and not p.exists() for p in present[DROPPED]),
                 "kernhub cache prune removes the unreferenced snapshot and the receipts of its variant",
                 support.tail(prune))
    report.check(all(p.exists() for p in present[KEPT]), "... and keeps the receipts of the variant it keeps",
                 str(present[KEPT]))
    load(report, tmp, cache, KEPT, "kernels 0.19.1 loads the kept repo offline after kernhub's commands",
         HF_HUB_OFFLINE=1)

    # kernhub fetch relinks a file of the kept variant: its receipts go first.
    variant_dir = folder(cache, KEPT) / "snapshots" / commits[KEPT] / "build" / VARIANT
    (variant_dir / "__init__.py").unlink()
    fetch = kh(args, "fetch", KEPT + "@v1", "--endpoint", server.endpoint, "--cache-dir", str(cache), "--json",
               KERNHUB_BACKEND="cpu")
    report.check(fetch.returncode == 0 and (variant_dir / "__init__.py").is_symlink()
                 and not any(p.exists() for p in present[KEPT]),
                 "kernhub fetch relinks the missing file and removes the variant's receipts", support.tail(fetch))
    if load(report, tmp, cache, KEPT, "kernels 0.19.1 loads it offline again, hashing it itself",
            HF_HUB_OFFLINE=1):
        report.check(receipts[KEPT][0].is_file(), "... and writes its own receipt again", str(receipts[KEPT][0]))


if __name__ == "__main__":
    sys.exit(main())
