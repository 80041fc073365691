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
import urllib.error
import urllib.request
from pathlib import Path

import interop_support as support
from interop_support import NAMES, clean_env, folder_name


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
        snapshot = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"])
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

        so = next(f for f in repo["files"] if f["path"].endswith(support.SO_NAME))
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


PHASES = {"mirror": phase_mirror}


# ---- parent -------------------------------------------------------------------

def kernhub_mirror(args, report, names, server, registry, workdir, variant, port):
    tree, conf = workdir / "mirror", workdir / "mirror.conf"
    cmd = [args.kernhub, "mirror", *names, "--to", str(tree), "--target", variant, "--nginx-conf", str(conf),
           "--listen", f"127.0.0.1:{port}", "--registry", str(registry), "--endpoint", server.endpoint,
           "--cache-dir", str(workdir / "cache-mirror"), "--json", "--quiet"]
    p = support.run(cmd, clean_env(HOME=workdir, HF_HOME=workdir / "hf-home"), "kernhub mirror", report)
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
    why = support.hf_missing()
    if why:
        return support.skipped(why)
    nginx = find_nginx(args.nginx)
    if not nginx:
        return support.skipped("nginx is not installed (.ci/install-deps installs it)")
    import huggingface_hub

    report = support.Report()
    report.info(f"huggingface_hub {huggingface_hub.__version__}; nginx {nginx}")
    variant = support.host_variant()
    if support.inputs_missing(args, report):
        return 1

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-mirror-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        kern_cache, hf_cache = workdir / "cache-kernhub", workdir / "cache-hf"
        hub = support.lay_out_vector_add_hub(args, report, workdir, variant)
        if hub is None:
            return 1
        hub_dir, repos, registry = hub

        server = support.HubServer(args.python, args.hub_server, hub_dir)
        web = None
        try:
            # What kernhub itself writes for the variant, fetched from the hub.
            if not all(support.kernhub_fetch(args, report, NAMES[r["repo_id"]], r, kern_cache, server, registry,
                                             variant, workdir) for r in repos):
                return 1
            port = free_port()
            made = kernhub_mirror(args, report, [NAMES[r["repo_id"]] for r in repos], server, registry, workdir,
                                  variant, port)
            if made is None:
                return 1
            tree, conf = made
            web = Nginx(nginx, workdir, conf, port)
            report.info(f"nginx serves the mirror at {web.endpoint}")

            server.control("/_reset", b"{}")
            env = clean_env(HOME=workdir, HF_HOME=workdir / "hf-home", HF_HUB_CACHE=hf_cache,
                            HF_ENDPOINT=web.endpoint)
            support.run_child(report, __file__, "mirror",
                              {"cache": str(hf_cache), "repos": repos, "variant": variant, "endpoint": web.endpoint},
                              workdir, env)
            report.equal(server.requests_since_reset(), [], "(h) no request of huggingface_hub reached the hub")
            for line in web.requests():
                report.info(f"nginx: {line}")
            for repo in repos:
                support.compare_layouts(report, repo, kern_cache, hf_cache)
        finally:
            if web is not None:
                web.close()
            server.close()

    return report.finish()


def main():
    parser = support.argument_parser(__doc__.split("\n\n")[0], required=False)
    parser.add_argument("--nginx", help="the nginx binary (default: the usual places, then PATH)")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--context", help=argparse.SUPPRESS)
    args = support.parse_args(parser)
    if args.phase:
        return support.run_phase(args.phase, PHASES[args.phase], args.context)
    return main_check(args)


if __name__ == "__main__":
    sys.exit(main())
