#!/usr/bin/env python3
"""Interop: the Python `kernels` library loads offline what `kernhub prewarm` put into a cache.

This is the CI-image job for Python consumers: an image builder with no torch
and no GPU runs `kernhub prewarm --lock kernels.lock --target VARIANT`, and at
run time the `kernels` library loads the kernel from that cache with the hub
out of reach.

The hub (examples/hub/make_hub.py, served by tests/support/hub_server.py)
holds one kernel repo of a trusted organisation with two versions (branch v1,
and v2 = main). Each has Python variants that `kernels` can load without
torch (torch-cpu, torch-cuda, torch-universal: a package with __init__.py and
_ops.py, and a kernels-style metadata.json with the files' digest and the
"python-depends" list kernels needs), a torch28 CUDA variant that it cannot,
and the native-cpu variant with a real .so that kernhub loads.

--part current (kernels >= 0.17, the current kernels.lock format):
  (a) kernels itself says which variant it selects on this host
      (get_kernel_variants against the hub: without torch, torch-cuda where
      it finds a CUDA runtime library, else torch-cpu) and writes
      kernels.lock (`kernels lock PROJECT`, pinning v1); `kernhub prewarm
      --lock kernels.lock --target <that variant>` fills an empty cache with
      exactly that variant and refs/v1, and its --json report says so; with
      the hub server stopped and HF_HUB_OFFLINE=1,
      load_kernel(..., lockfile=kernels.lock) and get_kernel(..., version=1)
      load v1 of that variant from the cache (through KERNELS_CACHE and
      HF_HUB_CACHE), kernels' own digest check accepts it, and get_kernel(
      version=2), which was not prewarmed, fails;
  (b) huggingface_hub reads that cache offline: snapshot_download and
      hf_hub_download by "v1" and by commit find every file of the variant
      with the hub's bytes, and scan_cache_dir lists the commit with ref v1;
  (c) huggingface_hub fills a cache (snapshot_download of the variant at v1),
      and `kernhub prewarm --offline` over it exits 0 making no request (the
      hub is stopped), leaving huggingface_hub's trees/ as it was; with one
      of the variant's files removed it exits 6 naming that file. (An INFO
      line tells whether kernels itself loads offline from huggingface_hub's
      one-variant cache: with huggingface_hub 2.4 it does not, because of
      the trees/ listing.)
--part legacy (kernels <= 0.16, the older kernels.lock format with variant
  hashes): `kernels lock` writes the old format, kernhub prewarms from it,
  and kernels 0.16 load_kernel(..., lockfile=...) loads it offline; a lock
  whose variant hash differs from the hub is exit 4.

The script runs under the interpreter that has the `kernels` version of its
part (KERNHUB_TEST_PYTHON, or KERNHUB_TEST_PYTHON_KERNELS_LEGACY); every
kernels or huggingface_hub call runs in a child process so HF_HUB_OFFLINE and
the cache variables are read at import, as in real use. Prints one PASS/FAIL
line per check, then "N passed, N failed". Exit 0 when all pass, 1 when any
fails, 77 before any check ("SKIPPED: <reason>") when kernels or
huggingface_hub is missing or of the other part's generation.

Usage: test_kernels_prewarm.py --kernhub CLI --so LIB.so --make-hub make_hub.py
                               --hub-server hub_server.py [--python EXE]
                               --part current|legacy
"""

import base64
import hashlib
import json
import py_compile
import shutil
import sys
import tempfile
from pathlib import Path

import interop_support as support

TIMEOUT = 90  # seconds a child may take: kernels imports slowly
ORG = "kernhub-interop"
REPO = f"{ORG}/vector-add"
FOLDER = "kernels--" + REPO.replace("/", "--")
MODULE = "vector_add"  # metadata "name" vector-add, as a Python name
PYTHON_VARIANTS = ("torch-cpu", "torch-cuda", "torch-universal")
TORCH_CUDA = "torch28-cxx11-cu128-x86_64-linux"


# ---- environments ------------------------------------------------------------

clean_env = support.child_env
kernels_env = support.kernels_env
last_json = support.last_json
tail = support.tail


def hf_env(tmp, **extra):
    return clean_env(tmp, HF_HUB_DISABLE_TELEMETRY=1, **extra)


def run_python(code, env, *args):
    return support.run_python(code, env, *args, timeout=TIMEOUT)


# ---- the hub -----------------------------------------------------------------

def is_bytecode(relpath):
    """What kernels never downloads and its metadata.json digest and variant hash leave out."""
    return relpath.endswith(".pyc") or "__pycache__" in relpath.split("/")


def stray_bytecode(tmp):
    """An _ops.py compiled to bytecode that Python uses without looking at
    the source (an unchecked-hash .pyc), as a build that kernel-builder did
    not make may leave in a variant."""
    source = tmp / "stray" / "_ops.py"
    source.parent.mkdir()
    source.write_text("VARIANT = 'bytecode outside the digest'\n")
    pyc = tmp / "stray" / "_ops.pyc"
    py_compile.compile(str(source), cfile=str(pyc), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return base64.b64encode(pyc.read_bytes()).decode("ascii")


def python_variant_files(variant, version, pyc):
    init = (f"from ._ops import VARIANT\n"
            f"KERNEL_VERSION = {version}\n\n\n"
            f"def vector_add(a, b):\n"
            f"    return [x + y for x, y in zip(a, b)]\n")
    # The tag of the interpreter that runs kernels here, so it would be used.
    stray = f"build/{variant}/{MODULE}/__pycache__/_ops.{sys.implementation.cache_tag}.pyc"
    return {f"build/{variant}/{MODULE}/__init__.py": {"text": init},
            f"build/{variant}/{MODULE}/_ops.py": {"text": f"VARIANT = {variant!r}\n"},
            stray: {"base64": pyc, "lfs": False}}


def hub_spec(so, pyc):
    commits = []
    for version, branches in ((1, ["v1"]), (2, ["v2", "main"])):
        files = {"README.md": {"text": f"vector-add v{version}\n"},
                 f"build/{support.host_variant()}/libvector_add.so": {"path": str(so), "lfs": True},
                 f"build/{TORCH_CUDA}/{MODULE}/__init__.py": {"text": "raise ImportError('needs torch')\n"},
                 f"build/{TORCH_CUDA}/{MODULE}/_{MODULE}_cuda.abi3.so": {"text": f"not cuda {version}", "lfs": True}}
        for variant in PYTHON_VARIANTS:
            files.update(python_variant_files(variant, version, pyc))
        commits.append({"message": f"v{version}", "branches": branches, "metadata": True,
                        "metadata_extra": {"version": version, "python-depends": []}, "files": files})
    return {"organizations": {ORG: {"trusted_kernel_publisher": True}},
            "repos": [{"repo_id": REPO, "type": "kernel", "commits": commits}]}


class Hub:
    """make_hub.py's tree and a running hub_server.py that can be stopped."""

    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        spec = hub_spec(Path(args.so).resolve(), stray_bytecode(tmp))
        index = support.make_hub(args, spec, tmp / "hub", timeout=TIMEOUT)["repos"][REPO]
        self.branches, self.trees = index["branches"], index["trees"]
        self.server = support.HubServer(args.python, args.hub_server, tmp / "hub")
        self.endpoint = self.server.endpoint

    def files(self, commit, variant):
        """{relpath in the variant: sha256 hex} of one variant at one commit,
        bytecode left out."""
        prefix = f"build/{variant}/"
        out = {}
        for entry in self.trees[commit]:
            if (entry["type"] == "file" and entry["path"].startswith(prefix)
                    and not is_bytecode(entry["path"][len(prefix):])):
                data = (self.tmp / "hub" / "kernels" / REPO / "resolve" / commit / entry["path"]).read_bytes()
                out[entry["path"][len(prefix):]] = hashlib.sha256(data).hexdigest()
        return out

    def stop(self):
        self.server.close()


# ---- kernels children --------------------------------------------------------

LOAD = """
import json, sys
from pathlib import Path
import kernels
how, repo, arg = sys.argv[1:4]
if how == "lockfile":
    module = kernels.load_kernel(repo, lockfile=Path(arg))
else:
    module = kernels.get_kernel(repo, version=int(arg))
print(json.dumps({"file": module.__file__, "variant": module.VARIANT, "version": module.KERNEL_VERSION,
                  "sum": module.vector_add([1, 2, 3], [10, 20, 30])}))
"""

DIGEST = """
import json, sys
from pathlib import Path
from kernels import Metadata
from kernels._rust import Digest
variant_dir = Path(sys.argv[1])
metadata = Metadata.read_from_file(variant_dir / "metadata.json")
metadata.digest.validate(Digest.hash_variant(metadata.digest.algorithm, variant_dir))
print(json.dumps({"files": sorted(metadata.digest.files)}))
"""


def select_variant(report, tmp, hub):
    """The variant kernels prefers on this host, asked of kernels itself."""
    p, decisions, accepted = support.kernels_decisions(tmp, hub.endpoint, REPO, 1, timeout=TIMEOUT)
    report.info(f"kernels' decisions on this host: {decisions}")
    if not report.check(p.returncode == 0 and accepted, "kernels selects a variant of the repo on this host", tail(p)):
        return None
    report.check(accepted[0] in PYTHON_VARIANTS and TORCH_CUDA not in accepted,
                 f"without torch kernels prefers a torch-free Python variant ({accepted[0]})", str(accepted))
    return accepted[0]


def kernels_lock(report, tmp, hub, name):
    """`kernels lock PROJECT` against the hub; returns the lock file."""
    p, lock = support.kernels_lock(tmp, name, REPO, hub.endpoint, timeout=TIMEOUT)
    report.check(lock is not None, f"`kernels lock` writes {name}/kernels.lock from the hub", tail(p))
    return lock


def load(tmp, how, arg, cache_var, cache):
    """kernels loads offline; the hub server is stopped by then."""
    env = kernels_env(tmp, HF_HUB_OFFLINE=1, **{cache_var: cache})
    if cache_var == "KERNELS_CACHE":
        env["HF_HUB_CACHE"] = str(tmp / "nowhere")  # so only KERNELS_CACHE can find it
    p = run_python(LOAD, env, how, REPO, str(arg))
    return p, last_json(p.stdout) or {}


# ---- checks ------------------------------------------------------------------

def check_prewarmed(report, hub, cache, commit, variant, what):
    """The cache holds exactly `variant` at `commit`, byte-identical to the hub."""
    build = cache / FOLDER / "snapshots" / commit / "build"
    present = sorted(p.name for p in build.iterdir()) if build.is_dir() else []
    report.check(present == [variant], f"{what}: the snapshot holds exactly the {variant} variant", str(present))
    want = hub.files(commit, variant)
    got = {}
    for rel in want:
        path = build / variant / rel
        if path.is_file():
            got[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    report.check(got == want, f"{what}: all {len(want)} files of the variant, with the hub's bytes",
                 f"missing or different: {sorted(set(want.items()) ^ set(got.items()))}")
    root = build / variant
    stray = sorted(str(p.relative_to(root)) for p in root.rglob("*") if is_bytecode(str(p.relative_to(root))))
    report.check(not stray, f"{what}: no bytecode from the hub, which no digest covers (kernels never downloads it)",
                 str(stray))


def prewarm(cli, tmp, hub, lock, variant, cache, *extra):
    return support.kernhub(cli, ["prewarm", "--lock", str(lock), "--target", variant, "--cache-dir", str(cache),
                                 "--endpoint", hub.endpoint, "--json", *extra],
                           clean_env(tmp, HF_HUB_DISABLE_TELEMETRY=1), timeout=TIMEOUT)


def check_report(report, p, hub, commit, variant, cache, fetched, refs, what):
    """prewarm --json: one kernel, the target variant at the locked commit."""
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = {}
    kernels = out.get("kernels") or [{}]
    k = kernels[0]
    n = len(hub.files(commit, variant))
    got = (len(kernels), k.get("repo_id"), k.get("commit"), k.get("variant"), k.get("files"), k.get("fetched"),
           k.get("path"), k.get("refs"))
    want = (1, REPO, commit, variant, n, n if fetched else 0,
            str(cache / FOLDER / "snapshots" / commit / "build" / variant), refs)
    report.check(got == want, f"{what} the JSON report names the kernel, commit, variant, "
                 f"{'fetched' if fetched else 'already cached'} files and refs written", f"got {got}, want {want}")
    if not fetched:
        report.check(out.get("requests") == 0 and out.get("bytes_downloaded") == 0,
                     f"{what} no request and no byte downloaded", str(out))


def check_loaded(report, p, out, cache, commit, variant, version, what):
    where = cache / FOLDER / "snapshots" / commit / "build" / variant
    ok = (p.returncode == 0 and out.get("variant") == variant and out.get("version") == version
          and out.get("sum") == [11, 22, 33] and str(out.get("file", "")).startswith(str(where)))
    report.check(ok, what, f"loaded {out}; " + tail(p).replace("\n", " "))


def variant_and_lock(report, tmp, hub):
    """What both parts start from: the variant kernels selects and the lock
    `kernels lock` writes; None when either failed (a check says so)."""
    variant = select_variant(report, tmp, hub)
    lock = kernels_lock(report, tmp, hub, "project")
    return None if variant is None or lock is None else (variant, lock)


def prewarm_image(report, args, tmp, hub, lock, lock_name, variant, commit, refs):
    """`kernhub prewarm --lock` into an empty cache, as an image build does, and
    its report and contents checked; the cache, or None when it failed."""
    cache = tmp / "image-cache"
    p = prewarm(args.kernhub, tmp, hub, lock, variant, cache)
    report.info(f"kernhub prewarm --lock {lock_name} --target {variant}: exit {p.returncode}\n{p.stdout.strip()}")
    if not report.check(p.returncode == 0, f"(a) kernhub prewarm --lock {lock_name} fills an empty cache", tail(p)):
        return None
    check_report(report, p, hub, commit, variant, cache, fetched=True, refs=refs, what="(a)")
    check_prewarmed(report, hub, cache, commit, variant, "(a)")
    return cache


def part_current(report, args, tmp, hub, variant, lock):
    v1 = hub.branches["v1"]
    entries = json.loads(lock.read_text())
    report.check(entries == [{"dependency": {"repo-id": REPO, "version": 1}, "lock": {"commit": v1}}],
                 "the lock is kernels' current format, pinning v1's commit", lock.read_text())

    # (a) prewarm an empty cache, then load offline with the hub gone.
    cache = prewarm_image(report, args, tmp, hub, lock, "kernels.lock", variant, v1, refs=["v1"])
    if cache is None:
        return
    ref = cache / FOLDER / "refs" / "v1"
    report.check(ref.is_file() and ref.read_text() == v1, "(a) refs/v1 holds the locked commit, as huggingface_hub "
                 "writes it (no newline)", repr(ref.read_text() if ref.is_file() else None))
    trees = cache / FOLDER / "trees"
    report.check(not trees.exists() or not any(trees.iterdir()),
                 "(a) no huggingface_hub trees/ listing that would call the one-variant snapshot incomplete")

    # (c) huggingface_hub fills a cache while the hub is up.
    hf_cache = tmp / "hf-cache"
    download = (f"import huggingface_hub as h; print(h.snapshot_download({REPO!r}, repo_type='kernel', "
                f"revision='v1', allow_patterns=['build/{variant}/*'], "
                f"ignore_patterns=['*.pyc', '**/__pycache__/**']))")  # as kernels downloads
    p_hf = run_python(download, hf_env(tmp, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=hf_cache))
    report.check(p_hf.returncode == 0, "(c) huggingface_hub snapshot_download fills a cache with the variant",
                 tail(p_hf))

    hub.stop()  # from here on, nothing can be downloaded

    digest = run_python(DIGEST, kernels_env(tmp), str(cache / FOLDER / "snapshots" / v1 / "build" / variant))
    report.check(digest.returncode == 0, "(a) kernels' own digest check accepts the prewarmed variant "
                 "(metadata.json digest = the files)", tail(digest))
    for cache_var in ("HF_HUB_CACHE", "KERNELS_CACHE"):
        p, out = load(tmp, "lockfile", lock, cache_var, cache)
        check_loaded(report, p, out, cache, v1, variant, 1,
                     f"(a) offline load_kernel(lockfile=kernels.lock) loads v1 {variant} via {cache_var}")
        p, out = load(tmp, "version", 1, cache_var, cache)
        check_loaded(report, p, out, cache, v1, variant, 1,
                     f"(a) offline get_kernel(version=1) finds refs/v1 and loads {variant} via {cache_var}")
    p, out = load(tmp, "version", 2, "HF_HUB_CACHE", cache)
    report.check(p.returncode != 0 and "Version 2" in p.stderr,
                 "(a) offline get_kernel(version=2), not prewarmed, fails", tail(p))

    part_hf_reads(report, tmp, hub, cache, v1, variant)
    if p_hf.returncode == 0:
        # A fact, not a check: kernels' own download path leaves a one-variant
        # snapshot with huggingface_hub's trees/<commit>.json listing the whole
        # commit, which some huggingface_hub versions then call incomplete.
        p, out = load(tmp, "lockfile", lock, "HF_HUB_CACHE", hf_cache)
        report.info(f"kernels load_kernel offline over huggingface_hub's own one-variant cache: exit "
                    f"{p.returncode} {out or (p.stderr.strip().splitlines() or [''])[-1][:300]}")
        part_prewarm_offline(report, args, tmp, hub, lock, hf_cache, v1, variant)


def part_hf_reads(report, tmp, hub, cache, commit, variant):
    """(b) huggingface_hub offline over the prewarmed cache."""
    files = sorted(hub.files(commit, variant))
    code = """
import json, sys, hashlib, huggingface_hub as h
repo, commit, variant = sys.argv[1:4]
files = json.loads(sys.argv[4])
out = {"snapshot": {}, "files": {}}
for rev in ("v1", commit):
    out["snapshot"][rev] = h.snapshot_download(repo, repo_type="kernel", revision=rev,
                                               allow_patterns=[f"build/{variant}/*"])
    for rel in files:
        path = h.hf_hub_download(repo, f"build/{variant}/{rel}", repo_type="kernel", revision=rev)
        out["files"][f"{rev}:{rel}"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
info = h.scan_cache_dir()
out["scan"] = [[r.repo_id, r.repo_type, [[v.commit_hash, sorted(v.refs), v.nb_files] for v in r.revisions]]
               for r in info.repos]
out["warnings"] = [str(w) for w in info.warnings]
print(json.dumps(out))
"""
    p = run_python(code, hf_env(tmp, HF_HUB_OFFLINE=1, HF_HUB_CACHE=cache), REPO, commit, variant, json.dumps(files))
    out = last_json(p.stdout) or {}
    snapshot = str(cache / FOLDER / "snapshots" / commit)
    report.check(p.returncode == 0 and out.get("snapshot") == {"v1": snapshot, commit: snapshot},
                 "(b) offline snapshot_download by v1 and by commit returns the prewarmed snapshot", tail(p))
    want = {f"{rev}:{rel}": sha for rev in ("v1", commit) for rel, sha in hub.files(commit, variant).items()}
    report.check(out.get("files") == want,
                 f"(b) offline hf_hub_download finds all {len(files)} files of the variant with the hub's bytes",
                 str(out.get("files")))
    # kernels 0.19 keeps its verification receipts in <cache>/.verified-kernels/, which
    # huggingface_hub's scan warns about as "not a valid cache directory": the other
    # tool's data, and no warning about what kernhub wrote.
    warnings = [w for w in out.get("warnings") or [] if not w.rstrip("/").endswith("/.verified-kernels")]
    report.check(out.get("scan") == [[REPO, "kernel", [[commit, ["v1"], len(files)]]]] and not warnings,
                 "(b) scan_cache_dir lists the commit with ref v1 and no warning about what kernhub wrote",
                 f"{out.get('scan')} {out.get('warnings')}")


def part_prewarm_offline(report, args, tmp, hub, lock, hf_cache, commit, variant):
    """(c) kernhub prewarm --offline over huggingface_hub's cache (hub stopped)."""
    trees = sorted((hf_cache / FOLDER / "trees").iterdir())
    tree_bytes = [t.read_bytes() for t in trees]
    cache = tmp / "hf-cache-1"
    shutil.copytree(hf_cache, cache, symlinks=True)
    p = prewarm(args.kernhub, tmp, hub, lock, variant, cache, "--offline")
    report.info(f"kernhub prewarm --offline over huggingface_hub's cache: exit {p.returncode}\n{p.stdout.strip()}")
    if report.check(p.returncode == 0, "(c) kernhub prewarm --offline verifies huggingface_hub's cache: exit 0",
                    tail(p)):
        check_report(report, p, hub, commit, variant, cache, fetched=False, refs=[], what="(c)")
    report.check(sorted((cache / FOLDER / "trees").iterdir()) == [cache / FOLDER / "trees" / t.name for t in trees]
                 and [t.read_bytes() for t in sorted((cache / FOLDER / "trees").iterdir())] == tree_bytes,
                 "(c) huggingface_hub's trees/ is left as it was")

    cache = tmp / "hf-cache-2"
    shutil.copytree(hf_cache, cache, symlinks=True)
    gone = f"{MODULE}/_ops.py"
    link = cache / FOLDER / "snapshots" / commit / "build" / variant / gone
    blob = link.resolve()
    link.unlink()
    blob.unlink()
    p = prewarm(args.kernhub, tmp, hub, lock, variant, cache, "--offline")
    report.check(p.returncode == 6 and gone in p.stderr,
                 "(c) a file of the variant missing from the cache: exit 6 naming it", tail(p))


def part_legacy(report, args, tmp, hub, variant, lock):
    v1 = hub.branches["v1"]
    entries = json.loads(lock.read_text())
    ok = (len(entries) == 1 and entries[0].get("repo_id") == REPO and entries[0].get("sha") == v1
          and entries[0].get("variants", {}).get(variant, {}).get("hash_type") == "git_lfs_concat")
    report.check(ok, f"the lock is kernels' older format, pinning v1 with a hash for {variant}", lock.read_text())
    if not ok:
        return

    # A lock whose variant hash the hub does not match is refused.
    bad = tmp / "bad" / "kernels.lock"
    bad.parent.mkdir()
    wrong = json.loads(lock.read_text())
    digest = wrong[0]["variants"][variant]["hash"]
    wrong[0]["variants"][variant]["hash"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    bad.write_text(json.dumps(wrong, indent=2))
    p = prewarm(args.kernhub, tmp, hub, bad, variant, tmp / "bad-cache")
    report.check(p.returncode == 4 and variant in p.stderr,
                 "(a) a variant hash in the old-format lock that the hub does not match: exit 4 naming the variant",
                 tail(p))
    snapshot = tmp / "bad-cache" / FOLDER / "snapshots" / v1 / "build" / variant
    report.check(not snapshot.exists() or not any(snapshot.rglob("*.py")),
                 "(a) and nothing of the refused variant is in the snapshot")

    cache = prewarm_image(report, args, tmp, hub, lock, "<old-format kernels.lock>", variant, v1, refs=[])
    if cache is None:
        return

    hub.stop()
    for cache_var in ("HF_HUB_CACHE", "KERNELS_CACHE"):
        p, out = load(tmp, "lockfile", lock, cache_var, cache)
        check_loaded(report, p, out, cache, v1, variant, 1,
                     f"(a) offline kernels 0.16 load_kernel(lockfile=<old format>) loads v1 {variant} via {cache_var}")


# ---- main --------------------------------------------------------------------

def probe():
    """(kernels version, huggingface_hub has repo_type kernel) or a reason to skip."""
    try:
        import huggingface_hub  # noqa: F401
        import kernels
    except ImportError as e:
        return None, f"the Python kernels library is not installed for {sys.executable} ({e})"
    if not support.hf_has_kernel_repos():
        return None, "this huggingface_hub has no repo_type 'kernel'"
    return kernels.__version__, None


def main():
    parser = support.argument_parser()
    parser.add_argument("--part", choices=("current", "legacy"), required=True)
    args = support.parse_args(parser)

    version, why = probe()
    major_minor = tuple(int(x) for x in (version or "0.0").split(".")[:2])
    if why is None and args.part == "current" and major_minor < (0, 17):
        why = f"kernels {version} predates the current kernels.lock format (0.17)"
    if why is None and args.part == "legacy" and major_minor >= (0, 17):
        why = (f"kernels {version} no longer reads the older kernels.lock format; set "
               "KERNHUB_TEST_PYTHON_KERNELS_LEGACY to a Python with kernels 0.16")
    if why:
        return support.skipped(why)

    report = support.Report()
    with tempfile.TemporaryDirectory(prefix="kernhub-kernels-") as tmp:
        tmp = Path(tmp)
        hub = Hub(args, tmp)
        try:
            started = variant_and_lock(report, tmp, hub)
            if started is not None:
                (part_current if args.part == "current" else part_legacy)(report, args, tmp, hub, *started)
        finally:
            hub.stop()
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
