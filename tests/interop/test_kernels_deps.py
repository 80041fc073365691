#!/usr/bin/env python3
"""Interop: kernel dependency trees, between kernhub and the Python `kernels` library.

A kernel variant's metadata.json may name other kernels it needs
("kernel-depends": [{"repo-id": ORG/NAME, "version": N} or {..., "revision":
REV}]) and the oldest `kernels` it runs under ("kernels-minver": "X.Y.Z").
`kernels` (0.17 and later) resolves the whole tree before it loads anything, loads each
dependency before its dependents (one module per variant folder, so a shared
node is loaded once), and hands a kernel its dependencies while its
__init__.py runs (kernels.get_kernel_dep). It refuses a cycle, a kernel whose
minimum version it does not meet, and, online, a kernel whose organisation
is not a trusted kernel publisher (GET /api/organizations/ORG/overview).
This script checks that kernhub fetches, caches and refuses the same trees.

The hub (examples/hub/make_hub.py, served by tests/support/hub_server.py):

  kernhub-deps (trusted publisher)
    top     depends on mid (version 1) and leaf (version 1)
    mid     depends on leaf (version 1)
    leaf    depends on nothing: the node top and mid share
    cyc-a, cyc-b   depend on each other (a cycle)
    minver  needs kernels >= 99.0.0
  kernhub-untrusted (trustedKernelPublisher false)   leaf, a copy
  kernhub-unlisted  (no overview at all: 404)        leaf, a copy

Every kernel has branches v1 and main on its one commit, and the Python
variants `kernels` loads without torch (torch-cpu, torch-cuda,
torch-universal: a package with __init__.py and _ops.py, and the
"python-depends" list kernels needs in metadata.json). top, mid and leaf also
have this host's native-cpu variant with a real .so, which kernhub loads. A
kernel's __init__.py takes each dependency with get_kernel_dep and records
the order modules were loaded in, so a load shows its tree was really loaded.

Each part compares kernhub with kernels 0.19.1 on the same hub: the same
variant chosen (kernhub is given --target <the variant kernels selects>, or
both are forced to the CPU backend), the same refusal, the same files cached.

--part lock-prewarm: `kernels lock` on a project naming top = 1 writes one
  kernels.lock entry per kernel of the tree; `kernhub prewarm --lock
  kernels.lock --target <the variant kernels selects here>` fills an empty
  cache; with the hub stopped and HF_HUB_OFFLINE=1 kernels' load_kernel(top,
  lockfile=...) and get_kernel(top, version=1) load top with mid and leaf,
  and the cache holds that one variant of each of the three kernels. A
  kernels.lock written by hand pinning the untrusted organisation's kernel:
  kernels' get_locked_kernel refuses it online and kernhub prewarm --lock
  exits 4, neither caching anything of it; opted in, both fetch it, and the
  two caches hold the same files of the variant.
--part fetch-tree: `kernhub fetch kernhub-deps/top@v1 --target VARIANT --json`
  fetches the tree into an empty cache and lists "dependencies" as leaf then
  mid (each {repo_id, revision, commit, variant, path}, top itself not
  listed); kernels loads the tree offline from that cache with no request.
  The cycle: kernels raises ValueError and kernhub exits 4 naming both repos;
  what each leaves in its cache is an INFO line.
--part minver: kernels refuses the minver-99 kernel (RuntimeError naming
  both versions); kernhub fetch for this host exits 7 naming 99.0.0 and
  0.19.1. Both forced to the CPU backend refuse the same variant, and
  kernhub's cache holds at most that variant's metadata.json, never its
  other files (what kernels leaves is an INFO line). With --target kernhub
  fetches it (exit 0) and warns once naming both versions.
--part trust: kernels refuses the untrusted organisation's kernel and the
  one whose organisation has no overview, asking only for the overview;
  kernhub exits 4 for both, saying how to opt in (KERNHUB_TRUST_REMOTE_CODE,
  KERNHUB_ALLOWED_ORGS); after each refusal neither cache holds a file of
  it. Opted in (kernels trust_remote_code=[repo], kernhub
  KERNHUB_TRUST_REMOTE_CODE=repo --target <kernels' variant>) both caches
  hold the same files with the same bytes. For the trusted organisation a
  cold kernhub fetch asks for the overview once, a warm one not at all, and
  offline kernels and kernhub each say once that the check is skipped.
--part local: LOCAL_KERNELS=REPO=FOLDER[:REPO=FOLDER...] naming folders that
  hold only the kernels-family variants (torch-cpu, torch-cuda,
  torch-universal), as a repo folder, its build/ folder or a variant folder.
  kernels (backend="cpu") loads the tree from them; kernhub
  (KERNHUB_BACKEND=cpu) info --json selects the same variant of each kernel
  ("selected", "local_folder") and fetch --json gives the same variant
  folders, all with no request and no cache write. Both refuse an entry
  without '=' and a folder with no usable variant (only torch-cuda, backend
  cpu). kernhub load of a local native-cpu build (which kernels cannot load)
  makes no request and writes no cache.

Every kernels and huggingface_hub call runs in a child process, so
HF_HUB_OFFLINE and the cache variables are read at import, as in real use.
Prints one PASS/FAIL line per check, then "N passed, N failed". Exit 0 when
all pass, 1 when any fails, 77 before any check ("SKIPPED: <reason>") when
this interpreter lacks kernels 0.19 or a huggingface_hub with kernel repos.

Usage: test_kernels_deps.py --kernhub CLI --so LIB.so --make-hub make_hub.py
                            --hub-server hub_server.py [--python EXE]
                            --part lock-prewarm|fetch-tree|minver|trust|local
"""

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import interop_support as support

TIMEOUT = 90  # seconds a child may take: kernels imports slowly
PARTS = ("lock-prewarm", "fetch-tree", "minver", "trust", "local")

ORG = "kernhub-deps"
UNTRUSTED_ORG = "kernhub-untrusted"  # trustedKernelPublisher false
UNLISTED_ORG = "kernhub-unlisted"  # no overview: the hub answers 404
TOP, MID, LEAF = f"{ORG}/top", f"{ORG}/mid", f"{ORG}/leaf"
CYC_A, CYC_B = f"{ORG}/cyc-a", f"{ORG}/cyc-b"
MINVER = f"{ORG}/minver"
UNTRUSTED = f"{UNTRUSTED_ORG}/leaf"
UNLISTED = f"{UNLISTED_ORG}/leaf"
TREE = (LEAF, MID, TOP)  # the order kernels loads top's tree in
# Each kernel's dependencies (all at version 1), in its metadata's order.
DEPENDS = {TOP: [MID, LEAF], MID: [LEAF], LEAF: [], CYC_A: [CYC_B], CYC_B: [CYC_A], MINVER: [],
           UNTRUSTED: [], UNLISTED: []}
NATIVE = (TOP, MID, LEAF)  # the kernels with a native-cpu variant kernhub loads
MINVER_NEEDED = "99.0.0"
PYTHON_VARIANTS = ("torch-cpu", "torch-cuda", "torch-universal")
CPU_VARIANT = "torch-cpu"  # what kernels (backend="cpu") and kernhub (KERNHUB_BACKEND=cpu) select among them
SO_NAME = "libvector_add.so"
SYMBOL = "kh_vector_add"


def folder(repo):
    return "kernels--" + repo.replace("/", "--")


def module_name(repo):
    return repo.split("/")[1].replace("-", "_")  # kernels' KernelName.python_name


# ---- environments and children -------------------------------------------------

clean_env = support.child_env
kernels_env = support.kernels_env
last_json = support.last_json
tail = support.tail


def kernhub(args, tmp, argv, **env):
    return support.kernhub(args.kernhub, [str(a) for a in argv],
                           clean_env(tmp, HF_HUB_DISABLE_TELEMETRY=1, **env), timeout=TIMEOUT)


def stdout_json(p):
    """The one JSON object a `kernhub ... --json` printed, or {}."""
    try:
        out = json.loads(p.stdout)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def oneline(text, n=600):
    return " | ".join(line for line in (text or "").strip().splitlines())[:n]


# ---- the hub -------------------------------------------------------------------

def init_py(repo):
    """A kernel module that takes its dependencies from kernels while it loads
    and records, in a module the child planted, the order modules ran in."""
    return (
        "import sys\n"
        "from kernels import get_kernel_dep\n"
        "from ._ops import VARIANT\n\n"
        f"REPO = {repo!r}\n"
        f"DEP_IDS = {DEPENDS[repo]!r}\n"
        "DEPS = {dep: get_kernel_dep(dep) for dep in DEP_IDS}\n"
        "_trace = sys.modules.get('kernhub_deps_trace')\n"
        "if _trace is not None:\n"
        "    _trace.loaded.append(REPO)\n\n\n"
        "def tree():\n"
        "    return {'repo': REPO, 'variant': VARIANT, 'file': __file__, 'object': id(sys.modules[__name__]),\n"
        "            'deps': [DEPS[dep].tree() for dep in DEP_IDS]}\n")


def kernel_spec(repo, so):
    name = module_name(repo)
    files = {"README.md": {"text": f"{repo}: a kernel for the dependency interop test\n"}}
    for variant in PYTHON_VARIANTS:
        files[f"build/{variant}/{name}/__init__.py"] = {"text": init_py(repo)}
        files[f"build/{variant}/{name}/_ops.py"] = {"text": f"VARIANT = {variant!r}\n"}
    if repo in NATIVE:
        files[f"build/{support.host_variant()}/{SO_NAME}"] = {"path": str(so), "lfs": True}
    extra = {"version": 1, "python-depends": []}
    if DEPENDS[repo]:
        extra["kernel-depends"] = [{"repo-id": dep, "version": 1} for dep in DEPENDS[repo]]
    if repo == MINVER:
        extra["kernels-minver"] = MINVER_NEEDED
    return {"repo_id": repo, "type": "kernel", "commits": [
        {"message": "v1", "branches": ["v1", "main"], "metadata": True, "metadata_extra": extra, "files": files}]}


def hub_spec(so):
    # UNLISTED_ORG is left out of "organizations": make_hub.py writes no
    # overview for it, and hub_server.py answers 404.
    return {"organizations": {ORG: {"trusted_kernel_publisher": True},
                              UNTRUSTED_ORG: {"trusted_kernel_publisher": False}},
            "repos": [kernel_spec(repo, so) for repo in DEPENDS]}


class Hub:
    """make_hub.py's tree and a running hub_server.py that can be stopped."""

    def __init__(self, args, tmp):
        self.tmp = tmp
        self.index = support.make_hub(args, hub_spec(Path(args.so).resolve()), tmp / "hub", timeout=TIMEOUT)["repos"]
        self.server = support.HubServer(args.python, args.hub_server, tmp / "hub")
        self.endpoint = self.server.endpoint

    def commit(self, repo):
        return self.index[repo]["branches"]["v1"]

    def repo_dir(self, repo):
        """The hub's copy of the repo at v1: README.md and build/."""
        return self.tmp / "hub" / "kernels" / repo / "resolve" / self.commit(repo)

    def variant_files(self, repo, variant):
        prefix = f"build/{variant}/"
        return sorted(e["path"][len(prefix):] for e in self.index[repo]["trees"][self.commit(repo)]
                      if e["type"] == "file" and e["path"].startswith(prefix))

    def reset(self):
        self.server.control("/_reset", b"{}")

    def requests(self):
        return self.server.requests_since_reset()

    def stop(self):
        self.server.close()


def overview_path(org):
    return f"/api/organizations/{org}/overview"


# ---- kernels children ----------------------------------------------------------

# Loads a kernel as argv says (HOW REPO ARG [BACKEND]); prints its tree and
# the load order, or the exception kernels raised.
LOAD = """
import json, sys, types
from pathlib import Path
trace = types.ModuleType("kernhub_deps_trace")
trace.loaded = []
sys.modules["kernhub_deps_trace"] = trace
import kernels
how, repo, arg = sys.argv[1:4]
backend = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
try:
    if how == "lockfile":
        module = kernels.load_kernel(repo, lockfile=Path(arg), backend=backend)
    elif how == "locked":
        module = kernels.get_locked_kernel(repo, lockfile=Path(arg))
    elif how == "locked-trusting":
        module = kernels.get_locked_kernel(repo, lockfile=Path(arg), trust_remote_code=True)
    elif how == "revision":
        module = kernels.get_kernel(repo, revision=arg, backend=backend)
    elif how == "trusting":
        module = kernels.get_kernel(repo, version=int(arg), backend=backend, trust_remote_code=True)
    elif how == "trusting-list":
        module = kernels.get_kernel(repo, version=int(arg), backend=backend, trust_remote_code=[repo])
    else:
        module = kernels.get_kernel(repo, version=int(arg), backend=backend)
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    sys.exit(3)
print(json.dumps({"tree": module.tree(), "loaded": trace.loaded}))
"""


def kernels_load(tmp, how, repo, arg, backend=None, **env):
    """(process, its JSON) of a kernels load in a child."""
    p = support.run_python(LOAD, kernels_env(tmp, **env), how, repo, str(arg), backend or "", timeout=TIMEOUT)
    return p, last_json(p.stdout) or {}


def select_variant(report, tmp, hub):
    """The variant kernels prefers on this host, asked of kernels itself."""
    p, decisions, accepted = support.kernels_decisions(tmp, hub.endpoint, TOP, 1, timeout=TIMEOUT)
    report.info(f"kernels' decisions for {TOP} on this host: {decisions}")
    if not report.check(p.returncode == 0 and accepted and accepted[0] in PYTHON_VARIANTS,
                        "kernels selects a torch-free Python variant of top on this host", tail(p)):
        return None
    return accepted[0]


def kernels_lock(report, tmp, hub):
    """`kernels lock PROJECT` against the hub for a project naming top = 1; the lock file."""
    p, lock = support.kernels_lock(tmp, "project", TOP, hub.endpoint, timeout=TIMEOUT)
    report.check(lock is not None, "`kernels lock` writes kernels.lock for top's tree", tail(p))
    return lock


# ---- checks --------------------------------------------------------------------

def nodes(tree):
    """Every node of a loaded tree, depth first."""
    yield tree
    for dep in tree.get("deps", []):
        yield from nodes(dep)


def load_order(repo, done=None):
    """The order kernels runs a tree's modules in: depth first, dependencies
    in metadata order, each module once."""
    done = [] if done is None else done
    for dep in DEPENDS[repo]:
        if dep not in done:
            load_order(dep, done)
    done.append(repo)
    return done


def check_tree_loaded(report, p, out, repo, variant, where, what):
    """kernels loaded `repo` with its whole tree, from `where` (a folder
    every module file must be under, or a dict repo -> folder), dependencies
    first and a shared node once."""
    tree = out.get("tree")
    if not report.check(p.returncode == 0 and tree is not None, f"{what}: it loads",
                        f"{out.get('error')}: {out.get('message')} " + oneline(p.stderr)):
        return

    def shape(node):
        return [node["repo"], [shape(d) for d in node["deps"]]]

    def want_shape(r):
        return [r, [want_shape(d) for d in DEPENDS[r]]]

    report.equal(shape(tree), want_shape(repo), f"{what}: each module holds the dependencies get_kernel_dep gave it")
    everything = list(nodes(tree))
    report.check(all(n["variant"] == variant for n in everything), f"{what}: every kernel of the tree is {variant}",
                 str([(n["repo"], n["variant"]) for n in everything]))
    places = where if isinstance(where, dict) else {n["repo"]: where for n in everything}
    stray = [(n["repo"], n["file"]) for n in everything if not str(n["file"]).startswith(str(places[n["repo"]]))]
    report.check(not stray, f"{what}: every module file is where it should be", f"{stray}, want under {places}")
    objects = {}
    for n in everything:
        objects.setdefault(n["repo"], set()).add(n["object"])
    report.check(all(len(ids) == 1 for ids in objects.values()),
                 f"{what}: a kernel two others depend on is one module", str(objects))
    report.equal(out.get("loaded"), load_order(repo), f"{what}: modules ran dependencies first, each once")


def cache_variants(cache):
    """{repo folder: {commit: [variant, ...]}} of what a cache holds."""
    out = {}
    if not cache.is_dir():
        return out
    for repo in sorted(p for p in cache.iterdir() if p.name.startswith("kernels--")):
        snapshots = repo / "snapshots"
        out[repo.name] = {c.name: sorted(v.name for v in (c / "build").iterdir()) if (c / "build").is_dir() else []
                          for c in sorted(snapshots.iterdir())} if snapshots.is_dir() else {}
    return out


def files_under(root):
    """Sorted paths, relative to root, of the files under it (a symlink to a blob counts as its file)."""
    return sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file()) if root.is_dir() else []


def repo_files(cache, repo):
    """Every file a cache holds for repo: under its kernels-- folder and its .locks folder."""
    return [f"{where}/{f}" for where in (folder(repo), f".locks/{folder(repo)}") for f in files_under(cache / where)]


def variant_contents(cache, hub, repo, variant):
    """{path under snapshots/<v1 commit>/build/<variant>: bytes} of a cache."""
    root = cache / folder(repo) / "snapshots" / hub.commit(repo) / "build" / variant
    return {f: (root / f).read_bytes() for f in files_under(root)}


def check_same_variant_files(report, hub, repo, variant, kcache, hcache, what):
    """kernels' cache and kernhub's hold the same files of repo's variant, with the same bytes."""
    kfiles, hfiles = variant_contents(kcache, hub, repo, variant), variant_contents(hcache, hub, repo, variant)
    report.info(f"{what}: kernels cached {sorted(kfiles)}, kernhub {sorted(hfiles)} "
                f"(under snapshots/<commit>/build/{variant})")
    report.check(kfiles and sorted(kfiles) == sorted(hfiles),
                 f"{what}: kernels' cache and kernhub's hold the same files of {repo} {variant}",
                 f"kernels {sorted(kfiles)}, kernhub {sorted(hfiles)}")
    report.check(kfiles and kfiles == hfiles, f"{what}: with the same bytes",
                 str([f for f in kfiles if kfiles[f] != hfiles.get(f)]))
    report.equal(cache_variants(hcache).get(folder(repo)), cache_variants(kcache).get(folder(repo)),
                 f"{what}: both hold that one variant at the same commit")


def check_cache_holds_tree(report, hub, cache, variant, what):
    """The cache holds exactly `variant` of each kernel of top's tree, every file of it, and refs/v1."""
    want = {folder(r): {hub.commit(r): [variant]} for r in TREE}
    got = cache_variants(cache)
    report.equal(got, want, f"{what}: the cache holds the {variant} variant of top, mid and leaf, nothing else")
    missing = []
    for repo in TREE:
        root = cache / folder(repo) / "snapshots" / hub.commit(repo) / "build" / variant
        missing += [f"{repo}:{f}" for f in hub.variant_files(repo, variant) if not (root / f).is_file()]
    report.check(not missing, f"{what}: every file of those variants is there", str(missing))
    refs = {r: (cache / folder(r) / "refs" / "v1").read_text() if (cache / folder(r) / "refs" / "v1").is_file()
            else None for r in TREE}
    report.equal(refs, {r: hub.commit(r) for r in TREE}, f"{what}: refs/v1 of each names its commit")


def overview_requests(requests, org):
    return [r for r in requests if f"GET {overview_path(org)} " in r]


# ---- --part lock-prewarm -------------------------------------------------------

def part_lock_prewarm(report, args, tmp, hub, variant):
    # 1. kernels locks the tree.
    lock = kernels_lock(report, tmp, hub)
    if lock is None:
        return
    text = lock.read_text()
    report.info(f"kernels.lock as kernels {kernels_version()} wrote it:\n{text}")
    try:
        entries = json.loads(text)
    except ValueError:
        entries = None
    want = sorted([{"dependency": {"repo-id": r, "version": 1}, "lock": {"commit": hub.commit(r)}} for r in TREE],
                  key=json.dumps)
    got = sorted(entries, key=json.dumps) if isinstance(entries, list) else entries
    report.check(got == want, "kernels.lock has one entry per kernel of the tree (top, mid, leaf), each keyed by "
                 "version 1 and pinning v1's commit", text)

    # 2. kernhub prewarms the tree for that variant into an empty cache.
    cache = tmp / "image-cache"
    p = kernhub(args, tmp, ["prewarm", "--lock", lock, "--target", variant, "--cache-dir", cache,
                            "--endpoint", hub.endpoint, "--json"])
    report.info(f"kernhub prewarm --lock kernels.lock --target {variant}: exit {p.returncode}\n{p.stdout.strip()}")
    if not report.check(p.returncode == 0, f"kernhub prewarm --lock kernels.lock --target {variant} fills an empty "
                        "cache", tail(p)):
        return
    out = stdout_json(p)
    listed = sorted((k.get("repo_id"), k.get("commit"), k.get("variant")) for k in out.get("kernels", []))
    report.equal(listed, sorted((r, hub.commit(r), variant) for r in TREE),
                 "kernhub prewarm's report names the three kernels at their locked commits")
    check_cache_holds_tree(report, hub, cache, variant, "prewarm")

    # 3. A lock naming the untrusted organisation's kernel: its pin is no
    # opt-in for kernels (get_locked_kernel checks the publisher online) nor
    # for kernhub (no registry names the repo).
    check_untrusted_lock(report, args, tmp, hub, variant)

    # 4. The hub goes away; kernels loads the tree offline from that cache.
    hub.stop()
    p, out = kernels_load(tmp, "lockfile", TOP, lock, HF_HUB_OFFLINE=1, HF_HUB_CACHE=cache)
    check_tree_loaded(report, p, out, TOP, variant, cache,
                      "offline load_kernel(top, lockfile=kernels.lock) over the prewarmed cache")
    p, out = kernels_load(tmp, "version", TOP, 1, HF_HUB_OFFLINE=1, KERNELS_CACHE=cache,
                          HF_HUB_CACHE=tmp / "nowhere")
    check_tree_loaded(report, p, out, TOP, variant, cache,
                      "offline get_kernel(top, version=1) via KERNELS_CACHE over the prewarmed cache")
    report.info("kernels' log in that offline get_kernel: " + oneline(p.stderr, 800))


def check_untrusted_lock(report, args, tmp, hub, variant):
    ulock = tmp / "untrusted.lock"  # kernels' format, written by hand
    ulock.write_text(json.dumps([{"dependency": {"repo-id": UNTRUSTED, "version": 1},
                                  "lock": {"commit": hub.commit(UNTRUSTED)}}], indent=2) + "\n")
    kcache = tmp / "kernels-untrusted-lock"
    hub.reset()
    p, out = kernels_load(tmp, "locked", UNTRUSTED, ulock, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=kcache)
    report.info(f"kernels get_locked_kernel({UNTRUSTED!r}, lockfile=<its pin>): {out.get('error')}: "
                f"{out.get('message')}; requests {hub.requests()}")
    report.check(p.returncode == 3 and out.get("error") == "ValueError"
                 and "is not from a trusted publisher" in out.get("message", ""),
                 "kernels get_locked_kernel refuses the untrusted organisation's locked kernel", tail(p))
    report.equal(repo_files(kcache, UNTRUSTED), [], "and kernels cached nothing of it")

    cache = tmp / "untrusted-lock-cache"
    hub.reset()
    p = kernhub(args, tmp, ["prewarm", "--lock", ulock, "--target", variant, "--cache-dir", cache,
                            "--endpoint", hub.endpoint])
    requests = hub.requests()
    report.info(f"kernhub prewarm --lock <{UNTRUSTED} pinned> --target {variant}: exit {p.returncode}: "
                f"{oneline(p.stderr)}; requests {requests}")
    report.check(p.returncode == 4 and "KERNHUB_TRUST_REMOTE_CODE" in p.stderr,
                 f"kernhub prewarm --lock of a lock pinning {UNTRUSTED}: exit 4 (trusted-publisher refusal) "
                 "naming KERNHUB_TRUST_REMOTE_CODE", tail(p))
    report.equal(repo_files(cache, UNTRUSTED), [], "and kernhub cached nothing of it")
    # The overview goes out beside the listing (docs/trust.md, "Trusted
    # publishers"): no file of the repo may be asked before its answer.
    report.equal([r for r in requests if f"/{UNTRUSTED}/resolve/" in r], [],
                 "and kernhub asked for no file of the repo")

    # Opted in, both fetch it, and cache the same files of the variant.
    p, out = kernels_load(tmp, "locked-trusting", UNTRUSTED, ulock, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=kcache)
    check_tree_loaded(report, p, out, UNTRUSTED, variant, kcache,
                      f"kernels get_locked_kernel({UNTRUSTED!r}, trust_remote_code=True)")
    p = kernhub(args, tmp, ["prewarm", "--lock", ulock, "--target", variant, "--cache-dir", cache,
                            "--endpoint", hub.endpoint], KERNHUB_TRUST_REMOTE_CODE=1)
    report.check(p.returncode == 0, "with KERNHUB_TRUST_REMOTE_CODE=1 that kernhub prewarm --lock exits 0", tail(p))
    check_same_variant_files(report, hub, UNTRUSTED, variant, kcache, cache, "the opted-in locked kernel")


# ---- --part fetch-tree ---------------------------------------------------------

def fetch(args, tmp, hub, repo, cache, *extra, **env):
    return kernhub(args, tmp, ["fetch", f"{repo}@v1", "--endpoint", hub.endpoint, "--cache-dir", cache, *extra],
                   **env)


def part_fetch_tree(report, args, tmp, hub, variant):
    cache = tmp / "fetch-cache"
    p = fetch(args, tmp, hub, TOP, cache, "--target", variant, "--json")
    report.info(f"kernhub fetch {TOP}@v1 --target {variant} --json: exit {p.returncode}\n{p.stdout.strip()}")
    if report.check(p.returncode == 0, f"kernhub fetch {TOP}@v1 --target {variant} exits 0", tail(p)):
        out = stdout_json(p)
        deps = out.get("dependencies")
        if report.check(isinstance(deps, list) and all(isinstance(d, dict) for d in deps),
                        "fetch --json lists \"dependencies\"", str(out)[:800]):
            report.equal([d.get("repo_id") for d in deps], [LEAF, MID],
                         "\"dependencies\" is leaf then mid: each once, a dependency before its dependents, "
                         "top itself not listed")
            got = sorted((d.get("repo_id"), d.get("revision"), d.get("commit"), d.get("variant"), d.get("path"))
                         for d in deps)
            want = sorted((r, "v1", hub.commit(r), variant,
                           str(cache / folder(r) / "snapshots" / hub.commit(r) / "build" / variant))
                          for r in (LEAF, MID))
            report.equal(got, want, "each dependency: repo_id, revision v1, its commit, the variant and its path "
                         "in the cache")
        check_cache_holds_tree(report, hub, cache, variant, "fetch")
        hub.reset()
        p2, out2 = kernels_load(tmp, "version", TOP, 1, HF_HUB_OFFLINE=1, HF_HUB_CACHE=cache)
        check_tree_loaded(report, p2, out2, TOP, variant, cache,
                          "offline get_kernel(top, version=1) over the cache kernhub fetch filled")
        report.equal(hub.requests(), [], "that offline load made no request to the hub")

    # The cycle, both ways.
    p, out = kernels_load(tmp, "version", CYC_A, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=tmp / "kernels-cycle")
    report.info(f"kernels get_kernel({CYC_A!r}, version=1): {out.get('error')}: {out.get('message')}")
    report.check(p.returncode == 3 and out.get("error") == "ValueError" and "Cyclic" in out.get("message", ""),
                 "kernels refuses the cycle cyc-a -> cyc-b -> cyc-a (ValueError)", tail(p))
    cache = tmp / "cycle-cache"
    p = fetch(args, tmp, hub, CYC_A, cache, "--target", variant)
    report.info(f"kernhub fetch {CYC_A}@v1: exit {p.returncode}: {oneline(p.stderr)}")
    report.check(p.returncode == 4 and CYC_A in p.stderr and CYC_B in p.stderr,
                 f"kernhub fetch {CYC_A}@v1 refuses the cycle: exit 4 naming {CYC_A} and {CYC_B}", tail(p))
    report.info(f"what kernhub left in its cache after refusing the cycle: {cache_variants(cache)}")
    report.info(f"what kernels left in its cache after refusing it: {files_under(tmp / 'kernels-cycle')}")


# ---- --part minver -------------------------------------------------------------

def part_minver(report, args, tmp, hub, variant):
    version = kernels_version()
    p, out = kernels_load(tmp, "version", MINVER, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=tmp / "kernels-minver")
    report.info(f"kernels get_kernel({MINVER!r}, version=1): {out.get('error')}: {out.get('message')}")
    report.check(p.returncode == 3 and out.get("error") == "RuntimeError"
                 and f"kernels>={MINVER_NEEDED}" in out.get("message", "") and version in out.get("message", ""),
                 f"kernels {version} refuses the kernel that needs kernels >= {MINVER_NEEDED}", tail(p))

    p = fetch(args, tmp, hub, MINVER, tmp / "minver-host")
    report.info(f"kernhub fetch {MINVER}@v1 (this host): exit {p.returncode}: {oneline(p.stderr)}")
    report.check(p.returncode == 7 and MINVER_NEEDED in p.stderr and version in p.stderr,
                 f"kernhub fetch {MINVER}@v1 for this host: exit 7 naming {MINVER_NEEDED} and {version}", tail(p))
    report.info(f"after those refusals kernels' cache holds {repo_files(tmp / 'kernels-minver', MINVER)}; "
                f"kernhub's {repo_files(tmp / 'minver-host', MINVER)}")

    # The same refusal of the same variant: both forced to the CPU backend.
    kcache, cache = tmp / "kernels-minver-cpu", tmp / "minver-cpu"
    p, out = kernels_load(tmp, "version", MINVER, 1, backend="cpu", HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=kcache)
    report.info(f"kernels get_kernel({MINVER!r}, version=1, backend='cpu'): {out.get('error')}: {out.get('message')}")
    words = f"variant '{CPU_VARIANT}' requires kernels>={MINVER_NEEDED}"
    report.check(p.returncode == 3 and out.get("error") == "RuntimeError" and words in out.get("message", ""),
                 f"kernels (backend cpu) refuses {CPU_VARIANT} of the minver kernel", tail(p))
    p = fetch(args, tmp, hub, MINVER, cache, KERNHUB_BACKEND="cpu")
    report.info(f"kernhub fetch {MINVER}@v1 (this host, KERNHUB_BACKEND=cpu): exit {p.returncode}: "
                f"{oneline(p.stderr)}")
    report.check(p.returncode == 7 and CPU_VARIANT in p.stderr and MINVER_NEEDED in p.stderr,
                 f"kernhub (KERNHUB_BACKEND=cpu) refuses the same variant, {CPU_VARIANT}: exit 7", tail(p))
    kfiles, hfiles = repo_files(kcache, MINVER), repo_files(cache, MINVER)
    report.info(f"what kernels left in its cache after refusing {CPU_VARIANT}: {kfiles}")
    report.info(f"what kernhub left in its cache after refusing {CPU_VARIANT}: {hfiles}")
    snapshot = f"{folder(MINVER)}/snapshots/{hub.commit(MINVER)}/"
    kvariant = sorted(f[len(snapshot):] for f in kfiles if f.startswith(snapshot))
    hvariant = sorted(f[len(snapshot):] for f in hfiles if f.startswith(snapshot))
    report.check(set(hvariant) <= {f"build/{CPU_VARIANT}/metadata.json"},
                 f"kernhub's snapshot holds at most build/{CPU_VARIANT}/metadata.json, none of the variant's "
                 "other files", str(hvariant))
    report.check(set(hvariant) <= set(kvariant),
                 "and no snapshot file kernels did not cache when it refused",
                 f"kernels {kvariant}, kernhub {hvariant}")
    blobs = [f for f in hfiles if f.startswith(f"{folder(MINVER)}/blobs/")]
    report.check(len(blobs) <= len(hvariant), "and no blob beyond that metadata.json", str(blobs))
    p = fetch(args, tmp, hub, MINVER, tmp / "minver-target", "--target", variant)
    report.info(f"kernhub fetch {MINVER}@v1 --target {variant}: exit {p.returncode}: {oneline(p.stderr)}")
    warned = [line for line in p.stderr.splitlines() if MINVER_NEEDED in line and version in line]
    report.check(p.returncode == 0 and len(warned) == 1,
                 f"kernhub fetch {MINVER}@v1 --target {variant}: exit 0 and one warning naming {MINVER_NEEDED} "
                 f"and {version}", tail(p))


# ---- --part trust --------------------------------------------------------------

def part_trust(report, args, tmp, hub, variant):
    # kernels, online: the untrusted organisation, then the one with no overview.
    for repo, org, words, status in ((UNTRUSTED, UNTRUSTED_ORG, "is not from a trusted publisher", 200),
                                     (UNLISTED, UNLISTED_ORG, "could not verify publisher trust status", 404)):
        hub.reset()
        p, out = kernels_load(tmp, "version", repo, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=tmp / "kernels-a")
        requests = hub.requests()
        report.info(f"kernels get_kernel({repo!r}, version=1): {out.get('error')}: {out.get('message')}")
        report.info(f"kernels' requests for it: {requests}")
        report.check(p.returncode == 3 and out.get("error") == "ValueError" and words in out.get("message", ""),
                     f"kernels refuses {repo} ({words})", tail(p))
        # huggingface_hub itself may ask for /api/agent-harnesses (its
        # User-Agent registry, once a day); that is not kernels' doing.
        asked = [r for r in requests if "/api/agent-harnesses" not in r]
        report.equal(asked, [f"hub GET {overview_path(org)} -> {status}"],
                     f"kernels asked for {overview_path(org)} (answered {status}) and nothing of the repo")
        report.equal(repo_files(tmp / "kernels-a", repo), [], f"kernels cached no file of {repo}")
    p, out = kernels_load(tmp, "trusting", UNTRUSTED, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=tmp / "kernels-a")
    check_tree_loaded(report, p, out, UNTRUSTED, variant, tmp / "kernels-a",
                      f"kernels get_kernel({UNTRUSTED!r}, trust_remote_code=True)")

    # kernels, online for its tree, then offline over its own cache: the
    # skipped check is a warning.
    kcache = tmp / "kernels-b"
    hub.reset()
    p, out = kernels_load(tmp, "version", TOP, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=kcache)
    check_tree_loaded(report, p, out, TOP, variant, kcache, f"kernels get_kernel({TOP!r}) online (a trusted publisher)")
    report.info(f"kernels asked for {overview_path(ORG)} {len(overview_requests(hub.requests(), ORG))} times "
                "for top's tree (once per kernel it resolved: leaf twice)")
    # Facts, not checks: kernels cannot load offline from the cache its own
    # online get_kernel filled (it downloads by commit, so no refs/v1; and
    # huggingface_hub 2.4 calls the one-variant snapshot incomplete).
    for how, arg in (("version", 1), ("revision", hub.commit(LEAF))):
        p, out = kernels_load(tmp, how, LEAF, arg, HF_HUB_OFFLINE=1, HF_HUB_CACHE=kcache)
        report.info(f"kernels offline get_kernel({LEAF!r}, {how}=...) over the cache its own online get_kernel "
                    f"filled: exit {p.returncode} {out.get('error')}: {out.get('message')}")
    # So the offline warning is seen over a cache kernhub filled (as in --part lock-prewarm).
    kcache = tmp / "kernels-c"
    p = fetch(args, tmp, hub, LEAF, kcache, "--target", variant)
    report.check(p.returncode == 0, f"kernhub fetch {LEAF}@v1 --target {variant} fills a cache for kernels", tail(p))
    p, out = kernels_load(tmp, "version", LEAF, 1, HF_HUB_OFFLINE=1, HF_HUB_CACHE=kcache)
    skipped = [line for line in p.stderr.splitlines() if "trust" in line.lower()]
    report.info(f"kernels offline get_kernel({LEAF!r}, version=1) warns: {skipped}")
    report.check(p.returncode == 0 and len(skipped) == 1 and "offline" in skipped[0],
                 "offline, kernels loads the cached kernel and warns once that it skips the publisher check", tail(p))

    # kernhub: the untrusted organisation is refused, with how to opt in.
    cache = tmp / "kernhub-a"
    hub.reset()
    p = fetch(args, tmp, hub, UNTRUSTED, cache, "--target", variant)
    report.info(f"kernhub fetch {UNTRUSTED}@v1: exit {p.returncode}: {oneline(p.stderr)}")
    report.check(p.returncode == 4 and "KERNHUB_TRUST_REMOTE_CODE" in p.stderr and "KERNHUB_ALLOWED_ORGS" in p.stderr,
                 f"kernhub fetch {UNTRUSTED}@v1: exit 4 naming KERNHUB_TRUST_REMOTE_CODE and KERNHUB_ALLOWED_ORGS",
                 tail(p))
    report.equal(repo_files(cache, UNTRUSTED), [], f"and kernhub cached no file of {UNTRUSTED}")
    report.check(len(overview_requests(hub.requests(), UNTRUSTED_ORG)) == 1,
                 f"kernhub asked for {overview_path(UNTRUSTED_ORG)} once", str(hub.requests()))
    p = fetch(args, tmp, hub, UNLISTED, cache, "--target", variant)
    report.info(f"kernhub fetch {UNLISTED}@v1 (its organisation has no overview): exit {p.returncode}: "
                f"{oneline(p.stderr)}")
    report.check(p.returncode == 4, f"kernhub fetch {UNLISTED}@v1, whose publisher cannot be verified: exit 4",
                 tail(p))
    report.equal(repo_files(cache, UNLISTED), [], f"and kernhub cached no file of {UNLISTED}")
    p = fetch(args, tmp, hub, UNTRUSTED, cache, "--target", variant, KERNHUB_TRUST_REMOTE_CODE=1)
    report.check(p.returncode == 0, f"with KERNHUB_TRUST_REMOTE_CODE=1 kernhub fetch {UNTRUSTED}@v1 exits 0", tail(p))

    # Opted in for that one repo, both fetch the same variant (kernhub is
    # given the one kernels selects) and cache the same files.
    kcache, cache = tmp / "kernels-opted-in", tmp / "kernhub-opted-in"
    p, out = kernels_load(tmp, "trusting-list", UNTRUSTED, 1, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=kcache)
    check_tree_loaded(report, p, out, UNTRUSTED, variant, kcache,
                      f"kernels get_kernel({UNTRUSTED!r}, trust_remote_code=[{UNTRUSTED!r}])")
    p = fetch(args, tmp, hub, UNTRUSTED, cache, "--target", variant, KERNHUB_TRUST_REMOTE_CODE=UNTRUSTED)
    report.check(p.returncode == 0,
                 f"with KERNHUB_TRUST_REMOTE_CODE={UNTRUSTED} kernhub fetch {UNTRUSTED}@v1 --target {variant} exits 0",
                 tail(p))
    check_same_variant_files(report, hub, UNTRUSTED, variant, kcache, cache, "opted in to the untrusted kernel")

    # kernhub: the trusted organisation, cold, warm and offline.
    cache = tmp / "kernhub-b"
    for state, want in (("cold", 1), ("warm", 0)):
        hub.reset()
        p = fetch(args, tmp, hub, LEAF, cache, "--target", variant)
        asked = overview_requests(hub.requests(), ORG)
        report.check(p.returncode == 0 and len(asked) == want,
                     f"kernhub fetch {LEAF}@v1 ({state} cache): exit 0, {want} request(s) for {overview_path(ORG)}",
                     f"{asked}; {tail(p)}")
    hub.reset()
    p = fetch(args, tmp, hub, LEAF, cache, "--target", variant, HF_HUB_OFFLINE=1)
    notices = [line for line in p.stderr.splitlines() if "trust" in line.lower()]  # no path here says "trust"
    report.info(f"kernhub fetch {LEAF}@v1 offline: exit {p.returncode}: {oneline(p.stderr)}")
    report.check(p.returncode == 0 and len(notices) == 1 and hub.requests() == [],
                 "offline (HF_HUB_OFFLINE=1) kernhub fetches from the cache and says once that it skips the "
                 "publisher check", f"{notices}; requests {hub.requests()}; {tail(p)}")


# ---- --part local --------------------------------------------------------------

def part_local(report, args, tmp, hub, variant):
    # Local builds: copies of the hub's trees, outside any cache, holding only
    # the kernels-family variants, so both choose from the same folders.
    native = support.host_variant()
    local = tmp / "local"
    for repo in TREE:
        shutil.copytree(hub.repo_dir(repo), local / module_name(repo), ignore=shutil.ignore_patterns(native))
    roots = {repo: local / module_name(repo) for repo in TREE}
    layouts = {"a repo folder holding build/": lambda r: roots[r],
               "the build/ folder": lambda r: roots[r] / "build",
               "a variant folder": lambda r: roots[r] / "build" / CPU_VARIANT}
    kcache, cache = tmp / "kernels-local-cache", tmp / "kernhub-local-cache"
    for layout, path in layouts.items():
        spec = ":".join(f"{r}={path(r)}" for r in TREE)
        hub.reset()
        p, out = kernels_load(tmp, "version", TOP, 1, backend="cpu", LOCAL_KERNELS=spec, HF_ENDPOINT=hub.endpoint,
                              HF_HUB_CACHE=kcache)
        check_tree_loaded(report, p, out, TOP, CPU_VARIANT, {r: roots[r] / "build" / CPU_VARIANT for r in TREE},
                          f"kernels (backend cpu) with LOCAL_KERNELS naming {layout} of each kernel")
        report.equal(hub.requests(), [], f"kernels with LOCAL_KERNELS ({layout}) made no request")
        # The variant folder kernels loaded each kernel from: its package's parent.
        loaded = {n["repo"]: str(Path(n["file"]).parent.parent) for n in nodes(out.get("tree") or {"deps": []})
                  if "repo" in n}
        report.info(f"kernels loaded, with LOCAL_KERNELS naming {layout}: {loaded}")

        # kernhub, forced to the CPU backend too, over the same folders.
        for repo in TREE:
            hub.reset()
            p = kernhub(args, tmp, ["info", f"{repo}@v1", "--endpoint", hub.endpoint, "--cache-dir", cache, "--json"],
                        LOCAL_KERNELS=spec, KERNHUB_BACKEND="cpu")
            info = stdout_json(p)
            got = (info.get("selected"), info.get("local_folder"))
            want = (Path(loaded[repo]).name if repo in loaded else None, str(path(repo)))
            report.check(p.returncode == 0 and got == want and hub.requests() == [],
                         f"kernhub info {repo}@v1 (KERNHUB_BACKEND=cpu, LOCAL_KERNELS naming {layout}): exit 0, "
                         "\"selected\" is the variant kernels loaded, \"local_folder\" the folder named, no request",
                         f"got {got}, want {want}; requests {hub.requests()}; {tail(p)}")
        hub.reset()
        p = kernhub(args, tmp, ["fetch", f"{TOP}@v1", "--endpoint", hub.endpoint, "--cache-dir", cache, "--json"],
                    LOCAL_KERNELS=spec, KERNHUB_BACKEND="cpu")
        out = stdout_json(p)
        got = {out.get("repo_id"): out.get("path"),
               **{d.get("repo_id"): d.get("path") for d in out.get("dependencies") or [] if isinstance(d, dict)}}
        report.info(f"kernhub fetch {TOP}@v1 --json (KERNHUB_BACKEND=cpu, LOCAL_KERNELS naming {layout}): "
                    f"exit {p.returncode}: paths {got}")
        report.check(p.returncode == 0 and got == loaded and hub.requests() == [],
                     f"kernhub fetch {TOP}@v1 (KERNHUB_BACKEND=cpu, LOCAL_KERNELS naming {layout}): the variant "
                     "folders of top, mid and leaf are those kernels loaded, no request",
                     f"got {got}, want {loaded}; requests {hub.requests()}; {tail(p)}")
    report.check(not kcache.exists(), "kernels wrote no cache for LOCAL_KERNELS kernels")

    # kernhub only: load of a local native-cpu build (kernels has no loader
    # for one), from a copy that keeps it.
    native_root = tmp / "local-native" / module_name(LEAF)
    shutil.copytree(hub.repo_dir(LEAF), native_root)
    hub.reset()
    spec = f"{LEAF}={native_root}"
    p = kernhub(args, tmp, ["load", f"{LEAF}@v1", "--symbol", SYMBOL, "--endpoint", hub.endpoint,
                            "--cache-dir", cache, "--json"], LOCAL_KERNELS=spec)
    out = stdout_json(p)
    report.info(f"kernhub load {LEAF}@v1 with LOCAL_KERNELS={spec}: exit {p.returncode}: variant "
                f"{out.get('variant')}, path {out.get('path')}, local_folder {out.get('local_folder')}")
    report.check(p.returncode == 0 and out.get("path") == str(native_root / "build" / native)
                 and out.get("local_folder") == str(native_root) and hub.requests() == [],
                 f"kernhub load {LEAF}@v1 with LOCAL_KERNELS: exit 0, loads {native} from the folder, no request",
                 f"requests {hub.requests()}; {tail(p)}")
    report.check(not cache.exists() or not any(cache.rglob("*")),
                 "kernhub wrote nothing to the cache for LOCAL_KERNELS kernels",
                 str(sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))[:20]) if cache.exists() else "")

    # Refusals, both ways: an entry without '=', and a folder with no usable
    # variant (only torch-cuda, and the backend is cpu).
    cuda_only = tmp / "local-cuda-only" / module_name(TOP)
    shutil.copytree(hub.repo_dir(TOP), cuda_only,
                    ignore=shutil.ignore_patterns(*(v for v in (*PYTHON_VARIANTS, native) if v != "torch-cuda")))
    for spec, what, kwant, hwant in (
            (TOP, "an entry without '='", ("ValueError", "Invalid LOCAL_KERNELS entry"), (2, "LOCAL_KERNELS")),
            (f"{TOP}={cuda_only}", "a folder with no usable variant (only torch-cuda, backend cpu)",
             ("FileNotFoundError", "Cannot find a build variant"), (3, str(cuda_only)))):
        hub.reset()
        p, out = kernels_load(tmp, "version", TOP, 1, backend="cpu", LOCAL_KERNELS=spec, HF_ENDPOINT=hub.endpoint,
                              HF_HUB_CACHE=kcache)
        report.info(f"kernels (backend cpu) with LOCAL_KERNELS={spec!r}: {out.get('error')}: "
                    f"{oneline(out.get('message'))}")
        report.check(p.returncode == 3 and out.get("error") == kwant[0]
                     and out.get("message", "").startswith(kwant[1]) and hub.requests() == [],
                     f"kernels refuses {what} ({kwant[0]}), no request", tail(p))
        p = kernhub(args, tmp, ["info", f"{TOP}@v1", "--endpoint", hub.endpoint, "--cache-dir", cache],
                    LOCAL_KERNELS=spec, KERNHUB_BACKEND="cpu")
        report.info(f"kernhub info (KERNHUB_BACKEND=cpu) with LOCAL_KERNELS={spec!r}: exit {p.returncode}: "
                    f"{oneline(p.stderr)}")
        report.check(p.returncode == hwant[0] and hwant[1] in p.stderr and hub.requests() == [],
                     f"kernhub refuses {what}: exit {hwant[0]} naming {hwant[1]}, no request", tail(p))
    report.check(not kcache.exists() and (not cache.exists() or not any(cache.rglob("*"))),
                 "neither cached anything for those refusals")


# ---- main ----------------------------------------------------------------------

def kernels_version():
    import kernels

    return kernels.__version__


def probe():
    """None, or a reason to skip."""
    try:
        import huggingface_hub  # noqa: F401
        import kernels
    except ImportError as e:
        return f"the Python kernels library is not installed for {sys.executable} ({e})"
    if not support.hf_has_kernel_repos():
        return "this huggingface_hub has no repo_type 'kernel'"
    if tuple(int(x) for x in kernels.__version__.split(".")[:2]) < (0, 19):
        return f"kernels {kernels.__version__} is older than the release kernhub follows (0.19)"
    return None


def main():
    parser = support.argument_parser()
    parser.add_argument("--part", choices=PARTS, required=True)
    args = support.parse_args(parser)
    why = probe()
    if why:
        return support.skipped(why)

    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernhub-deps-") as tmp:
        tmp = Path(tmp)
        hub = Hub(args, tmp)
        try:
            variant = select_variant(report, tmp, hub)
            if variant is not None:
                globals()["part_" + args.part.replace("-", "_")](report, args, tmp, hub, variant)
        finally:
            hub.stop()
    report.info(f"--part {args.part} took {time.monotonic() - started:.1f} s")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
