#!/usr/bin/env python3
"""Interop: huggingface_hub downloads from a `kernhub mirror` tree served by nginx.

Lays out the same small hub as test_hf_cache.py (a model repo and a kernel
repo, each with build/<native-cpu variant>/ holding a real .so, a generated
metadata.json and a nested header), serves it with tests/support/hub_server.py,
then:

  (m) `kernhub mirror ... --target <variant> --nginx-conf FILE --listen ...`
      writes a static hub tree of both repos and its nginx server block, and a
      real nginx serves the tree with that block included inside http { };
  (h) huggingface_hub, with HF_ENDPOINT pointing at nginx, runs
      snapshot_download(allow_patterns=build/<variant>/*) and hf_hub_download
      of one file by branch name; both return the snapshot path with the
      original bytes, a file the mirror does not hold is EntryNotFound, and
      not one request reaches the hub;
  (d) huggingface_hub's cache (blobs/<etag>, snapshot link targets, refs/main)
      is byte-for-byte what `kernhub fetch` writes for the same variant.

Prints one PASS/FAIL line per check, INFO lines for facts, then "N passed,
N failed". Exit 0 when all pass, 1 when a check fails, 77 (before any check,
printing "SKIPPED: <reason>") when huggingface_hub, its repo_type "kernel" or
nginx is missing.

Usage: test_hf_mirror.py --kernhub CLI --so LIB.so --make-hub make_hub.py
                         --hub-server hub_server.py [--python EXE] [--nginx EXE]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_hf_cache as base  # noqa: E402 - shares the hub spec, the hub server and the cache comparison

SKIP_CODE = base.SKIP_CODE


def find_nginx(explicit):
    for candidate in ([explicit] if explicit else []) + ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("nginx")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """A foreground nginx whose http { } includes the server block kernhub wrote."""

    def __init__(self, binary, workdir, include, port):
        self.dir = workdir / "nginx"
        self.dir.mkdir()
        self.access_log = self.dir / "access.log"
        temps = "".join(f"  {t}_temp_path {self.dir / t};\n" for t in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                         "scgi"))
        conf = self.dir / "nginx.conf"
        conf.write_text("daemon off;\nworker_processes 1;\n" + ("user root;\n" if os.geteuid() == 0 else "")
                        + f"pid {self.dir / 'nginx.pid'};\nerror_log {self.dir / 'error.log'};\n"
                        + "events { worker_connections 64; }\n"
                        + f"http {{\n  access_log {self.access_log};\n{temps}  include {include};\n}}\n")
        self.proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(self.dir)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.endpoint = f"http://127.0.0.1:{port}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for _ in range(200):
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.proc.returncode}: {self.proc.stderr.read()}")
            try:
                opener.open(self.endpoint + "/", timeout=2)
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer: it is serving
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("nginx did not start serving")

    def requests(self):
        return self.access_log.read_text().splitlines() if self.access_log.exists() else []

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(3)  # SIGQUIT: graceful stop
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# ---- child phase (HF_ENDPOINT = nginx serving the mirror) ---------------------

def phase_mirror(ctx, report):
    import huggingface_hub

    try:
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:
        from huggingface_hub.utils import EntryNotFoundError
    from huggingface_hub import constants

    cache, variant = ctx["cache"], ctx["variant"]
    report.equal(constants.ENDPOINT, ctx["endpoint"], "huggingface_hub's endpoint is the nginx mirror")
    for repo in ctx["repos"]:
        label = f"(h) {repo['type']} repo {repo['repo_id']}"
        snapshot = os.path.join(cache, base.folder_name(repo), "snapshots", repo["commit"])
        try:
            got = huggingface_hub.snapshot_download(repo["repo_id"], repo_type=repo["type"], revision="main",
                                                    cache_dir=cache, allow_patterns=[f"build/{variant}/*"])
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            report.check(False, f"{label}: snapshot_download(allow_patterns=build/{variant}/*)",
                         f"{type(e).__name__}: {e}")
            continue
        report.equal(got, snapshot, f"{label}: snapshot_download returns the commit's snapshot")
        wrong = [f["path"] for f in repo["files"]
                 if Path(snapshot, f["path"]).read_bytes() != Path(f["source"]).read_bytes()]
        report.equal(wrong, [], f"{label}: every file of the variant has the hub's bytes")

        so = next(f for f in repo["files"] if f["path"].endswith(base.SO_NAME))
        what = f"{label}: hf_hub_download({so['path']!r}, revision='main')"
        try:
            path = huggingface_hub.hf_hub_download(repo["repo_id"], so["path"], repo_type=repo["type"],
                                                   revision="main", cache_dir=cache)
            report.check(path == os.path.join(snapshot, so["path"])
                         and Path(path).read_bytes() == Path(so["source"]).read_bytes(), what, f"returned {path!r}")
        except Exception as e:  # noqa: BLE001
            report.check(False, what, f"{type(e).__name__}: {e}")

        try:
            huggingface_hub.hf_hub_download(repo["repo_id"], "README.md", repo_type=repo["type"], revision="main",
                                            cache_dir=cache)
            report.check(False, f"{label}: a file the mirror does not hold is EntryNotFound", "it was downloaded")
        except EntryNotFoundError:
            report.check(True, f"{label}: a file the mirror does not hold is EntryNotFound")


def run_phase(ctx_path):
    report = base.Report()
    ctx = json.loads(Path(ctx_path).read_text())
    try:
        phase_mirror(ctx, report)
    except Exception:  # noqa: BLE001 - report, do not hide
        traceback.print_exc()
        report.check(False, "phase mirror ran to the end", "it raised (traceback above)")
    print(f"PHASE-RESULT: {json.dumps({'passed': report.passed, 'failed': report.failed})}", flush=True)
    return 1 if report.failed else 0


def run_child(report, ctx, workdir, env):
    ctx_path = workdir / "mirror-phase.json"
    ctx_path.write_text(json.dumps(ctx))
    p = base.run([sys.executable, os.path.abspath(__file__), "--phase", "--context", str(ctx_path)], env,
                 "phase mirror", report)
    if p is None:
        return
    sys.stdout.write(p.stdout.replace("PHASE-RESULT:", "phase result:"))
    if p.stderr.strip():
        print(f"--- stderr of phase mirror ---\n{p.stderr.rstrip()}\n---", flush=True)
    counts = next((json.loads(line[len("PHASE-RESULT: "):]) for line in p.stdout.splitlines()
                   if line.startswith("PHASE-RESULT: ")), None)
    if counts is None:
        report.check(False, "phase mirror reported its results", f"exit {p.returncode}")
        return
    report.passed += counts["passed"]
    report.failed += counts["failed"]


# ---- parent -------------------------------------------------------------------

def kernhub_mirror(args, report, names, server, registry, workdir, variant, port):
    tree, conf = workdir / "mirror", workdir / "mirror.conf"
    cmd = [args.kernhub, "mirror", *names, "--to", str(tree), "--target", variant, "--nginx-conf", str(conf),
           "--listen", f"127.0.0.1:{port}", "--registry", str(registry), "--endpoint", server.endpoint,
           "--cache-dir", str(workdir / "cache-mirror"), "--json", "--quiet"]
    p = base.run(cmd, base.clean_env(HOME=workdir, HF_HOME=workdir / "hf-home"), "kernhub mirror", report)
    ok = p is not None and p.returncode == 0
    if not report.check(ok, "(m) kernhub mirror --target --nginx-conf exits 0",
                        p and f"exit {p.returncode}: {p.stderr.strip()[:400]}"):
        return None
    out = json.loads(p.stdout)
    report.equal([(k["name"], k["variants"]) for k in out["kernels"]], [(n, [variant]) for n in names],
                 "(m) kernhub mirror reports each kernel with the one --target variant")
    report.info(f"kernhub mirror: {out['files_linked']} linked, {out['files_copied']} copied, "
                f"{out['requests']} requests to the hub")
    return tree, conf


def main_check(args):
    try:
        import huggingface_hub
    except ImportError:
        print(f"SKIPPED: huggingface_hub is not installed for {sys.executable} "
              "(tests/run.sh installs tests/requirements.txt into build/venv)", flush=True)
        return SKIP_CODE
    if not base.kernel_type_support()["download"]:
        print(f"SKIPPED: huggingface_hub {huggingface_hub.__version__} has no repo_type 'kernel' for downloads",
              flush=True)
        return SKIP_CODE
    nginx = find_nginx(args.nginx)
    if not nginx:
        print("SKIPPED: nginx is not installed (.ci/install-deps installs it)", flush=True)
        return SKIP_CODE

    report = base.Report()
    report.info(f"huggingface_hub {huggingface_hub.__version__}; nginx {nginx}")
    variant = base.host_variant()
    for path, what in ((args.kernhub, "--kernhub"), (args.so, "--so"), (args.make_hub, "--make-hub"),
                       (args.hub_server, "--hub-server")):
        if not path or not os.path.isfile(path):
            report.check(False, f"input {what} exists", f"{path!r}")
            return 1

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-mirror-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        hub_dir, kern_cache, hf_cache = workdir / "hub", workdir / "cache-kernhub", workdir / "cache-hf"
        spec = workdir / "spec.json"
        spec.write_text(json.dumps(base.make_spec(os.path.abspath(args.so), variant), indent=1))
        p = base.run([args.python, args.make_hub, "--spec", str(spec), "--out", str(hub_dir)], base.clean_env(),
                     "make_hub.py", report)
        if not report.check(p is not None and p.returncode == 0, f"make_hub.py lays out the hub ({variant})",
                            p and p.stderr):
            return 1
        repos = base.expected_repos(hub_dir, variant)
        names = {base.MODEL_REPO: "interop-model", base.KERNEL_REPO: "interop-kernel"}
        registry = workdir / "registry.json"
        registry.write_text(json.dumps({"format": 1, "kernels": {
            names[r["repo_id"]]: {"repo_id": r["repo_id"], "repo_type": r["type"], "revision": "main",
                                  "symbol": "kh_vector_add", "file": base.SO_NAME} for r in repos}}))

        server = base.HubServer(args.python, args.hub_server, hub_dir)
        web = None
        try:
            # What kernhub itself writes for the variant, fetched from the hub.
            if not all(base.kernhub_fetch(args, report, names[r["repo_id"]], r, kern_cache, server, registry,
                                          variant, workdir) for r in repos):
                return 1
            port = free_port()
            made = kernhub_mirror(args, report, [names[r["repo_id"]] for r in repos], server, registry, workdir,
                                  variant, port)
            if made is None:
                return 1
            tree, conf = made
            web = Nginx(nginx, workdir, conf, port)
            report.info(f"nginx serves the mirror at {web.endpoint}")

            server.control("/_reset", b"{}")
            env = base.clean_env(HOME=workdir, HF_HOME=workdir / "hf-home", HF_HUB_CACHE=hf_cache,
                                 HF_ENDPOINT=web.endpoint)
            run_child(report, {"cache": str(hf_cache), "repos": repos, "variant": variant, "endpoint": web.endpoint},
                      workdir, env)
            report.equal(base.requests_since_reset(server), [], "(h) no request of huggingface_hub reached the hub")
            for line in web.requests():
                report.info(f"nginx: {line}")
            for repo in repos:
                base.compare_layouts(report, repo, kern_cache, hf_cache)
        finally:
            if web is not None:
                web.close()
            server.close()

    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 1 if report.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernhub", help="the kernhub CLI")
    parser.add_argument("--so", help="a real shared object to publish")
    parser.add_argument("--make-hub", help="examples/hub/make_hub.py")
    parser.add_argument("--hub-server", help="tests/support/hub_server.py")
    parser.add_argument("--python", default=sys.executable, help="Python for make_hub.py and hub_server.py")
    parser.add_argument("--nginx", help="the nginx binary (default: the usual places, then PATH)")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--context", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("kernhub", "so", "make_hub", "hub_server"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    if args.phase:
        return run_phase(args.context)
    return main_check(args)


if __name__ == "__main__":
    sys.exit(main())
