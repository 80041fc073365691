"""What the interop scripts in tests/interop/ share: arguments, the
skip-with-77 rule, PASS/FAIL counting, a scrubbed environment, running
kernhub and Python children (the kernels library's variant decisions and
`kernels lock` among them), laying out a hub with examples/hub/make_hub.py,
serving it with tests/support/hub_server.py, and the vector-add hub of a model
and a kernel repo that test_hf_cache.py and test_hf_mirror.py both compare
kernhub's cache against.

Every script prints one PASS/FAIL line per check (INFO and DIFF lines are
facts that fail nothing), then "N passed, N failed", and exits 0 when all
passed, 1 when a check failed or none ran, 77 ("SKIPPED: <reason>", before
any check) when its interpreter lacks what it tests. Every script takes
--kernhub CLI --so LIB.so --make-hub make_hub.py --hub-server hub_server.py
[--python EXE] (see argument_parser), and its own options. Each runs as
`python tests/interop/<script>.py`, so this folder is on sys.path and
`import interop_support` finds this file.
"""

import argparse
import contextlib
import hashlib
import json
import os
import stat
import subprocess
import sys
import traceback
import urllib.request
from pathlib import Path

SKIP_CODE = 77  # ctest's SKIP_RETURN_CODE: nothing was checked
TIMEOUT = 60  # seconds one child (kernhub, make_hub.py, a Python child) may take

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

    def finish(self):
        """Prints the totals; the exit status: 1 when a check failed or none ran."""
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed or self.passed == 0 else 0


def skipped(reason):
    """Exit status of a run that checked nothing (ctest counts it as skipped)."""
    print("SKIPPED:", reason, flush=True)
    return SKIP_CODE


def hf_has_kernel_repos():
    """Whether this interpreter's huggingface_hub downloads repo_type "kernel"."""
    from huggingface_hub import constants

    return "kernel" in getattr(constants, "REPO_TYPES_WITH_KERNEL", constants.REPO_TYPES)


def hf_missing(need_kernel=True):
    """Why huggingface_hub cannot serve this test here (a reason to skip), or None."""
    try:
        import huggingface_hub
    except ImportError:
        return (f"huggingface_hub is not installed for {sys.executable} "
                "(tests/run.sh installs tests/requirements.txt into a venv of its own)")
    if need_kernel and not hf_has_kernel_repos():
        return f"huggingface_hub {huggingface_hub.__version__} has no repo_type 'kernel' for downloads"
    return None


# ---- arguments ---------------------------------------------------------------

# Every script's inputs: option, environment variable (read with
# env_defaults), help.
INPUTS = (("--kernhub", "KERNHUB_CLI", "the kernhub CLI"),
          ("--so", "KERNHUB_INTEROP_SO", "a real shared object to publish"),
          ("--make-hub", "KERNHUB_MAKE_HUB", "examples/hub/make_hub.py"),
          ("--hub-server", "KERNHUB_HUB_SERVER", "tests/support/hub_server.py"))


def argument_parser(description=None, required=True, env_defaults=False):
    """The options every script takes; a script adds its own before parse_args."""
    parser = argparse.ArgumentParser(description=description)
    for option, variable, what in INPUTS:
        default = os.environ.get(variable) if env_defaults else None
        parser.add_argument(option, required=required and default is None, default=default, help=what)
    python = (os.environ.get("KERNHUB_PYTHON") if env_defaults else None) or sys.executable
    parser.add_argument("--python", default=python, help="Python for make_hub.py and hub_server.py")
    return parser


def parse_args(parser):
    """The arguments, with the input files made absolute (children run elsewhere)."""
    args = parser.parse_args()
    for name in ("kernhub", "so", "make_hub", "hub_server"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def inputs_missing(args, report):
    """Fails a check for the first input file that is not there; True then."""
    for option, _, _ in INPUTS:
        path = getattr(args, option[2:].replace("-", "_"))
        if not path or not os.path.isfile(path):
            report.check(False, f"input {option} exists", f"{path!r}")
            return True
    return False


# ---- environments and children -----------------------------------------------

def host_variant():
    machine = os.uname().machine.lower()
    return "native-cpu-" + {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine) + "-linux"


def scrubbed_env(also_drop=(), **extra):
    """The environment minus anything that could steer kernhub, huggingface_hub
    or kernels elsewhere (hub, cache, token, proxy variables and the prefixes in
    also_drop), quiet and loopback-only, then extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KERNHUB_", "KERNELS_", "HUGGINGFACE_", *also_drop))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({"NO_PROXY": "127.0.0.1,127.0.0.2,localhost", "no_proxy": "127.0.0.1,127.0.0.2,localhost",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
                "HF_HUB_DISABLE_XET": "1"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def clean_env(**extra):
    """scrubbed_env with huggingface_hub's telemetry off."""
    return scrubbed_env(**{"HF_HUB_DISABLE_TELEMETRY": 1, **extra})


# ---- the kernels library in children -----------------------------------------
# What test_kernels_prewarm.py and test_kernels_deps.py both ask of kernels.

def child_env(tmp, **extra):
    """No inherited hub, cache, kernels or proxy settings; HOME and HF_HOME inside tmp."""
    return scrubbed_env(also_drop=("LOCAL_KERNELS",), **{
        "HOME": tmp / "home", "HF_HOME": tmp / "hf-home", "PYTHONDONTWRITEBYTECODE": 1, **extra})


def kernels_env(tmp, **extra):
    """child_env for a kernels child. HF_HUB_DISABLE_TELEMETRY stays unset: with
    it, kernels (0.16 and 0.17 with huggingface_hub 2.4) sends a User-Agent
    ending in "; ", which the HTTP client refuses before any request leaves.
    The hub is on loopback, so nothing is reported anywhere."""
    return child_env(tmp, **extra)


def last_json(text):
    """The JSON document a child printed last (kernels logs to stderr)."""
    lines = [line for line in text.splitlines() if line.startswith(("{", "["))]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def tail(p, n=1500):
    """A finished child's exit status and the ends of its output, for a FAIL line."""
    return f"exit {p.returncode}: {(p.stderr or '')[-n:]} {(p.stdout or '')[-400:]}"


KERNELS_DECISIONS = """
import json, sys, kernels
decisions = kernels.get_kernel_variants(sys.argv[1], version=int(sys.argv[2]))
print(json.dumps([[type(d).__name__, d.variant.variant_str] for d in decisions]))
"""


def kernels_decisions(tmp, endpoint, repo, version, timeout=TIMEOUT):
    """kernels' variant decisions for repo at version on this host:
    (the child, [[kind, variant], ...], the accepted variants in order)."""
    p = run_python(KERNELS_DECISIONS,
                   kernels_env(tmp, HF_ENDPOINT=endpoint, HF_HUB_CACHE=tmp / "kernels-scratch"),
                   repo, str(version), timeout=timeout)
    decisions = last_json(p.stdout) or []
    return p, decisions, [name for kind, name in decisions if kind == "VariantAccepted"]


def kernels_variants_cli(tmp, endpoint, repo, version, timeout=TIMEOUT):
    """`kernels variants REPO --version N --json` (kernels 0.19's CLI): (the
    child, the variant it marks preferred, or None)."""
    cli = "import sys\nfrom kernels._internals.cli import main\nsys.argv[0] = 'kernels'; main()"
    p = subprocess.run([sys.executable, "-c", cli, "variants", repo, "--version", str(version), "--json"],
                       capture_output=True, text=True, timeout=timeout,
                       env=kernels_env(tmp, HF_ENDPOINT=endpoint, HF_HUB_CACHE=tmp / "kernels-scratch"))
    try:
        revisions = json.loads(p.stdout)["revisions"] if p.returncode == 0 else []
    except (ValueError, KeyError, TypeError):
        revisions = []
    preferred = [v["variant"] for r in revisions for v in r.get("variants", []) if v.get("preferred")]
    return p, (preferred[0] if len(preferred) == 1 else None)


def kernels_lock(tmp, name, repo, endpoint, timeout=TIMEOUT):
    """`kernels lock` on a project tmp/name whose pyproject.toml names repo = 1:
    (the child, its kernels.lock or None)."""
    project = tmp / name
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "demo"\nversion = "0.1"\n\n[tool.kernels.dependencies]\n"{repo}" = 1\n')
    # kernels 0.19 moved its CLI under kernels._internals; the legacy venv's 0.16 has it at kernels.cli.
    cli = ("import sys\ntry:\n    from kernels._internals.cli import main\nexcept ImportError:\n"
           "    from kernels.cli import main\nsys.argv[0] = 'kernels'; main()")
    p = subprocess.run([sys.executable, "-c", cli, "lock", str(project)], capture_output=True, text=True,
                       timeout=timeout, env=kernels_env(tmp, HF_ENDPOINT=endpoint, HF_HUB_CACHE=tmp / "kernels-scratch"))
    lock = project / "kernels.lock"
    return p, (lock if p.returncode == 0 and lock.is_file() else None)


def run_python(code, env, *args, timeout=TIMEOUT):
    """Runs code in a child of this interpreter, so huggingface_hub and kernels
    read their variables at import, as in real use."""
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def kernhub(cli, args, env, user=None, timeout=TIMEOUT, cwd=None):
    """Runs the kernhub CLI; as the numeric user when given (the caller is root),
    in `cwd` when given."""
    cmd = [cli, *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def run(cmd, env, what, report, timeout=TIMEOUT):
    """Runs cmd; a timeout or a missing program is a failed check and None."""
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        report.check(False, what, f"timed out after {timeout}s: {cmd}")
    except OSError as e:
        report.check(False, what, f"cannot run {cmd[0]}: {e}")
    return None


# ---- the hub -----------------------------------------------------------------

def make_hub(args, spec, out, timeout=TIMEOUT):
    """Lays out spec with make_hub.py into out (spec.json next to it); the hub's
    _hub.json index. Raises when make_hub.py fails. A spec without
    "organizations" gets every organisation of its repos as a trusted kernel
    publisher, so ad-hoc ORG/REPO fetches pass kernhub's (and kernels')
    trusted-publisher check as they would for such an organisation."""
    if "organizations" not in spec:
        orgs = {repo["repo_id"].split("/", 1)[0] for repo in spec.get("repos", [])}
        spec = {**spec, "organizations": {org: {"trusted_kernel_publisher": True} for org in sorted(orgs)}}
    spec_path = out.parent / "spec.json"
    spec_path.write_text(json.dumps(spec))
    subprocess.run([args.python, args.make_hub, "--spec", str(spec_path), "--out", str(out)], check=True,
                   timeout=timeout)
    return json.loads((out / "_hub.json").read_text())


class HubServer:
    """A running tests/support/hub_server.py over a make_hub.py tree."""

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

    def requests_since_reset(self):
        return [f"{r['host']} {r['method']} {r['path']} -> {r['status']}" for r in self.control("/_stats")["requests"]]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the server exits at EOF on stdin
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextlib.contextmanager
def served_hub(args, spec, out):
    """spec laid out into out and served while the block runs: (HubServer, _hub.json index)."""
    index = make_hub(args, spec, out)
    server = HubServer(args.python, args.hub_server, out)
    try:
        yield server, index
    finally:
        server.close()


# ---- child phases ------------------------------------------------------------
# A phase runs huggingface_hub in a child of this script (its variables are
# read at import) and hands its counts back on a PHASE-RESULT line.

def run_phase(name, phase, ctx_path):
    """In the child: runs phase(ctx, report) and prints its counts."""
    report = Report()
    ctx = json.loads(Path(ctx_path).read_text())
    try:
        phase(ctx, report)
    except Exception:  # noqa: BLE001 - report, do not hide
        traceback.print_exc()
        report.check(False, f"phase {name} ran to the end", "it raised (traceback above)")
    print(f"PHASE-RESULT: {json.dumps({'passed': report.passed, 'failed': report.failed})}", flush=True)
    return 1 if report.failed else 0


def run_child(report, script, phase, ctx, workdir, env):
    """In the parent: runs `script --phase phase` on ctx and adds its counts."""
    ctx_path = workdir / f"{phase}.json"
    ctx_path.write_text(json.dumps(ctx))
    cmd = [sys.executable, os.path.abspath(script), "--phase", phase, "--context", str(ctx_path)]
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


# ---- the vector-add hub of test_hf_cache.py and test_hf_mirror.py ------------

MODEL_REPO = "kernhub-interop/vector-add-model"
KERNEL_REPO = "kernhub-interop/vector-add"
NAMES = {MODEL_REPO: "interop-model", KERNEL_REPO: "interop-kernel"}  # registry names
SO_NAME = "libvector_add.so"
HEADER = "include/vector_add.h"


def folder_name(repo):
    return ("kernels--" if repo["type"] == "kernel" else "models--") + repo["repo_id"].replace("/", "--")


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


def lay_out_vector_add_hub(args, report, workdir, variant, repo_type=None):
    """make_spec laid out under workdir/hub and a registry.json naming its repos
    (only those of repo_type when given); (hub_dir, repos, registry), or None
    after a failed check."""
    hub_dir = workdir / "hub"
    spec = workdir / "spec.json"
    spec.write_text(json.dumps(make_spec(os.path.abspath(args.so), variant), indent=1))
    p = run([args.python, args.make_hub, "--spec", str(spec), "--out", str(hub_dir)], clean_env(), "make_hub.py",
            report)
    if not report.check(p is not None and p.returncode == 0, f"make_hub.py lays out the hub ({variant})",
                        p and p.stderr):
        return None
    repos = [r for r in expected_repos(hub_dir, variant) if repo_type in (None, r["type"])]
    registry = workdir / "registry.json"
    registry.write_text(json.dumps({"format": 1, "kernels": {
        NAMES[r["repo_id"]]: {"repo_id": r["repo_id"], "repo_type": r["type"], "revision": "main",
                              "symbol": "kh_vector_add", "file": SO_NAME} for r in repos}}))
    return hub_dir, repos, registry


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
