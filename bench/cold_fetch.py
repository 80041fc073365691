#!/usr/bin/env python3
"""Cold fetch at wire speed: `kernhub fetch` against curl and OpenSSL.

Cases (a) to (c) lay out a static hub tree with examples/hub/make_hub.py and
serve it with a real nginx on 127.0.0.1 (sendfile, TCP_NODELAY, keep-alive).
Each kernhub run fetches one variant into an emptied cache; its baseline is
one curl process fetching the same URLs, in the same order, into files
(`curl -o`), then one `openssl dgst -sha256` of those files. The URLs are
the ones nginx logged for a kernhub run (the organisation's overview, revision,
listing, every file), so
both sides make the same requests.

  (a) big    one file of 384 MiB (--big-mib)
  (b) many   48 files of 2 MiB
  (c) torch  8 files from 10 KiB to 40 MiB, shaped like a torch variant

Case (d) fetches the demo variant from the loopback hub server the tests use
(tests/support/hub_server.py) with kernhub and with huggingface_hub's
`hf download` (a test-only peer: --python names a venv that has it; the
test venv made by tests/run.sh does).

Runs alternate between kernhub and its baseline; each side's median wall
time over --runs runs is reported (one warm-up run of each side first), with
the ratios, the requests nginx saw per run and kernhub's peak RSS, taken
in one more, untimed run under GNU time (`/usr/bin/time -f %M`: wait4 from
this script would count the Python parent's pages, which a forked child
holds until it execs). The caches and output folders are emptied between runs, outside the
timing. No goal is asserted here: the output is a report.

  bench/cold_fetch.py --kernhub build-bench/kernhub [--runs 5] [--cases a,b,c,d]
                      [--python PYTHON-WITH-HUGGINGFACE_HUB] [--demo-hub build-bench/demo-hub]
                      [--work DIR] [--json OUT] [--big-mib 384]

Python 3 standard library only; needs nginx, curl and openssl on the PATH
or in the usual places.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIB = 1 << 20
KIB = 1 << 10


def host_variant() -> str:
    machine = os.uname().machine
    return f"native-cpu-{'aarch64' if machine in ('aarch64', 'arm64') else 'x86_64'}-linux"


def find_tool(name: str, extra=()) -> str:
    for candidate in (*extra, shutil.which(name)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit(f"cold_fetch.py: {name} not found (.ci/install-deps installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        left = size
        while left:
            n = min(left, 8 * MIB)
            out.write(os.urandom(n))
            left -= n


def case_files(case: str, big_mib: int):
    """(relative path, size) of the variant's files."""
    if case == "a":
        return [("model.bin", big_mib * MIB)]
    if case == "b":
        return [(f"part-{i:02d}.bin", 2 * MIB) for i in range(48)]
    if case == "c":
        return [
            ("vector_add/__init__.py", 10 * KIB),
            ("vector_add/_ops.py", 24 * KIB),
            ("vector_add/layers.py", 96 * KIB),
            ("vector_add/_kernels.json", 300 * KIB),
            ("vector_add/libhelper.so", 2 * MIB),
            ("vector_add/_vector_add_cpu.abi3.so", 12 * MIB),
            ("vector_add/_vector_add_extra.abi3.so", 24 * MIB),
            ("vector_add/_vector_add_fused.abi3.so", 40 * MIB),
        ]
    raise ValueError(case)


CASE_NAMES = {"a": "single file", "b": "48 x 2 MiB", "c": "torch-style, 8 files"}


def make_tree(work: Path, cases, big_mib: int) -> Path:
    variant = host_variant()
    sources = work / "sources"
    repos = []
    for case in cases:
        files = {}
        for rel, size in case_files(case, big_mib):
            src = sources / case / rel
            random_file(src, size)
            files[f"build/{variant}/{rel}"] = {"path": str(src.relative_to(work)), "lfs": True}
        repos.append({"repo_id": f"bench/case-{case}", "type": "kernel",
                      "commits": [{"message": "bench", "branches": ["main"], "metadata": True, "files": files}]})
    spec = work / "spec.json"
    # kernhub fetches an ORG/REPO that no registry names only from a trusted
    # kernel publisher: the organisation's overview (a static file here) says so.
    spec.write_text(json.dumps({"organizations": {"bench": {"trusted_kernel_publisher": True}}, "repos": repos}))
    tree = work / "hub"
    subprocess.run([sys.executable, str(ROOT / "examples/hub/make_hub.py"), "--spec", str(spec), "--out", str(tree)],
                   check=True)
    shutil.rmtree(sources)
    return tree


class Nginx:
    """Stock nginx serving `root` on 127.0.0.1, logging every request."""

    def __init__(self, binary: str, root: Path, work: Path):
        self.dir = work / "nginx"
        self.dir.mkdir()
        self.port = free_port()
        self.log = self.dir / "access.log"
        conf = self.dir / "nginx.conf"
        conf.write_text(
            "daemon off;\nworker_processes 2;\n" + ("user root;\n" if os.geteuid() == 0 else "") +
            f"pid {self.dir}/nginx.pid;\nerror_log {self.dir}/error.log;\n"
            "events { worker_connections 256; }\n"
            f"http {{\n  access_log {self.log};\n  client_body_temp_path {self.dir};\n"
            "  sendfile on;\n  tcp_nopush on;\n  tcp_nodelay on;\n"
            "  keepalive_timeout 60s;\n  keepalive_requests 100000;\n"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n    root {root};\n"
            "    default_type application/octet-stream;\n  }\n}\n")
        self.proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(self.dir)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.exit("cold_fetch.py: nginx did not start")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_lines(self):
        time.sleep(0.05)  # nginx logs after the response
        return self.log.read_text().splitlines() if self.log.exists() else []

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def peak_rss_mib(argv, env, before=None):
    """Peak RSS of one run of argv, from GNU time; None without it."""
    gnu_time = "/usr/bin/time"
    if not os.access(gnu_time, os.X_OK):
        return None
    if before:
        before()
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run([gnu_time, "-f", "%M", "-o", out.name, *argv], env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(out.read().split()[-1]) / 1024


def timed(argv, env=None):
    """(wall seconds, returncode) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, _ = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"cold_fetch.py: {' '.join(argv[:3])} ... failed ({code}): {err.strip()[-2000:]}")
    return wall


def empty(path: Path):
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def requested_urls(lines, endpoint):
    urls = []
    for line in lines:
        # combined log format: ... "GET /path HTTP/1.1" status ...
        try:
            request = line.split('"')[1]
            method, target, _ = request.split(" ")
        except (IndexError, ValueError):
            continue
        if method == "GET":
            urls.append(endpoint + target)
    return urls


def kernhub_env(cache: Path):
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("KERNHUB_", "HF_", "KERNELS_")):
            del env[name]
    env["KERNHUB_CACHE"] = str(cache)
    return env


def run_nginx_case(args, case, nginx, work, curl, openssl):
    repo = f"bench/case-{case}"
    cache = work / "cache"
    out = work / "curl-out"
    argv = [args.kernhub, "fetch", repo, "--endpoint", nginx.endpoint, "--quiet"]
    # Warm-up, and the URLs kernhub asks for.
    empty(cache)
    before = len(nginx.log_lines())
    timed(argv, kernhub_env(cache))
    lines = nginx.log_lines()
    k_rss = peak_rss_mib(argv, kernhub_env(cache), lambda: empty(cache))
    urls = requested_urls(lines[before:], nginx.endpoint)
    curl_argv = [curl, "-sS", "--fail", "--noproxy", "*"]
    outputs = []
    for i, url in enumerate(urls):
        target = out / f"f{i:03d}"
        outputs.append(str(target))
        curl_argv += ["-o", str(target), url]
    openssl_argv = [openssl, "dgst", "-sha256", *outputs]
    empty(out)
    timed(curl_argv)
    timed(openssl_argv)
    k_times, c_times, o_times = [], [], []
    for _ in range(args.runs):
        empty(cache)
        k_times.append(timed(argv, kernhub_env(cache)))
        empty(out)
        c_times.append(timed(curl_argv))
        o_times.append(timed(openssl_argv))
    sizes = sum(size for _, size in case_files(case, args.big_mib))
    k = statistics.median(k_times)
    c = statistics.median(c_times)
    co = statistics.median([a + b for a, b in zip(c_times, o_times)])
    return {
        "case": case, "name": CASE_NAMES[case], "bytes": sizes, "requests": len(urls),
        "kernhub_s": k, "curl_s": c, "curl_openssl_s": co,
        "ratio_curl_openssl": k / co, "ratio_curl": k / c,
        "kernhub_peak_rss_mib": k_rss, "curl_peak_rss_mib": peak_rss_mib(curl_argv, None, lambda: empty(out)),
        "kernhub_mib_s": sizes / MIB / k, "curl_mib_s": sizes / MIB / c,
    }


def run_hf_case(args, work):
    demo = Path(args.demo_hub) if args.demo_hub else None
    if demo is None or not (demo / "_hub.json").exists():
        return {"case": "d", "skipped": "no demo hub tree (--demo-hub, made by the build in <build>/demo-hub)"}
    python = args.python
    probe = subprocess.run([python, "-c", "import huggingface_hub"], capture_output=True) if python else None
    if probe is None or probe.returncode != 0:
        return {"case": "d", "skipped": "no Python with huggingface_hub (--python)"}
    server = subprocess.Popen([sys.executable, str(ROOT / "tests/support/hub_server.py"), "--root", str(demo)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        endpoint = json.loads(server.stdout.readline())["endpoint"]
        hub = json.loads((demo / "_hub.json").read_text())
        repo = hub["repos"][0]["repo_id"] if isinstance(hub.get("repos"), list) else next(iter(hub["repos"]))
        variant = host_variant()
        cache = work / "cache"
        k_argv = [args.kernhub, "fetch", repo, "--endpoint", endpoint, "--quiet"]
        hf = str(Path(python).parent / "hf")
        h_argv = [hf, "download", repo, "--repo-type", "kernel", "--include", f"build/{variant}/*",
                  "--cache-dir", str(cache), "--quiet"]
        h_env = kernhub_env(cache)
        h_env.update({"HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0",
                      "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_TOKEN": "", "NO_PROXY": "*"})
        k_times, h_times = [], []
        for warm_up in (True,) + (False,) * args.runs:
            empty(cache)
            wall = timed(k_argv, kernhub_env(cache))
            if not warm_up:
                k_times.append(wall)
            empty(cache)
            wall = timed(h_argv, h_env)
            if not warm_up:
                h_times.append(wall)
        k_rss = peak_rss_mib(k_argv, kernhub_env(cache), lambda: empty(cache))
        k = statistics.median(k_times)
        h = statistics.median(h_times)
        return {"case": "d", "name": f"demo variant of {repo}", "kernhub_s": k, "hf_download_s": h,
                "speedup_vs_hf": h / k, "kernhub_peak_rss_mib": k_rss}
    finally:
        server.stdin.close()
        server.wait(timeout=10)


def rss_text(mib):
    return "n/a (no /usr/bin/time)" if mib is None else f"{mib:.1f} MiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernhub", required=True, help="the kernhub CLI (a Release build)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default="a,b,c,d")
    parser.add_argument("--big-mib", type=int, default=384)
    parser.add_argument("--python", help="a Python with huggingface_hub, for case (d)")
    parser.add_argument("--demo-hub", help="the demo hub tree, for case (d)")
    parser.add_argument("--work", help="scratch folder on the disk to measure (default: a temp folder)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    args.kernhub = str(Path(args.kernhub).resolve())
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    curl = find_tool("curl")
    openssl = find_tool("openssl")
    work = Path(tempfile.mkdtemp(prefix="kernhub-cold-", dir=args.work))
    results = []
    try:
        nginx_cases = [c for c in cases if c in ("a", "b", "c")]
        if nginx_cases:
            tree = make_tree(work, nginx_cases, args.big_mib)
            nginx = Nginx(find_tool("nginx", ("/usr/sbin/nginx",)), tree, work)
            try:
                for case in nginx_cases:
                    results.append(run_nginx_case(args, case, nginx, work, curl, openssl))
            finally:
                nginx.stop()
        if "d" in cases:
            results.append(run_hf_case(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for r in results:
        if "skipped" in r:
            print(f"({r['case']}) skipped: {r['skipped']}")
        elif r["case"] == "d":
            print(f"({r['case']}) {r['name']}: kernhub {r['kernhub_s'] * 1000:.0f} ms, hf download "
                  f"{r['hf_download_s'] * 1000:.0f} ms: kernhub {r['speedup_vs_hf']:.1f}x faster "
                  f"(goal >= 5x); kernhub peak RSS {rss_text(r['kernhub_peak_rss_mib'])}")
        else:
            print(f"({r['case']}) {r['name']}, {r['bytes'] / MIB:.0f} MiB, {r['requests']} requests: "
                  f"kernhub {r['kernhub_s'] * 1000:.0f} ms ({r['kernhub_mib_s']:.0f} MiB/s), "
                  f"curl {r['curl_s'] * 1000:.0f} ms, curl + openssl {r['curl_openssl_s'] * 1000:.0f} ms")
            print(f"    kernhub / (curl + openssl) = {r['ratio_curl_openssl']:.2f} (goal <= 0.8); "
                  f"kernhub / curl = {r['ratio_curl']:.2f}; peak RSS kernhub "
                  f"{rss_text(r['kernhub_peak_rss_mib'])} (goal < 32), curl {rss_text(r['curl_peak_rss_mib'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
