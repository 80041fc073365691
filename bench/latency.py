#!/usr/bin/env python3
"""Cold fetches and loads with a real round-trip time, next to the floor.

The loopback hub the tests use (tests/support/hub_server.py: the hub on
127.0.0.1, the LFS "CDN" on 127.0.0.2) serves a tree laid out here with
examples/hub/make_hub.py, and a delay proxy (bench/delay_proxy.py) stands in
front of each of its two hosts and holds every request for the round-trip
time (RTT) before forwarding it. Each case runs at each --rtt:

  fetch by branch   `kernhub fetch bench-vector-add`: a registry name for
                    kh-test/vector-add at main, the demo variant (the
                    vector_add library, LFS, and metadata.json)
  fetch by commit   `kernhub fetch kh-test/vector-add@COMMIT`: a repo no
                    registry names, so kernhub also asks for the
                    organisation's overview (kh-test is a trusted publisher)
  floor, demo       one `curl --parallel` of the variant's two files from the
                    URLs they end at, then `openssl dgst -sha256` of them
  load torch        `kernhub load bench-torch-op` of a torch variant shaped
                    like a kernel-builder build: 8 files, one of them the
                    test op library (tests/fixtures/torch) padded to 40 MiB
                    with objcopy; kernhub loads LibTorch from --torch-dir and
                    the op
  load torch, warm  the same load --offline from a filled cache: what the
                    load costs without the network
  floor, torch      curl --parallel + sha256 of the 8 files, and of the 3 a
                    C++ load reads (the library, metadata.json, _ops.py)

For each case and RTT it reports the median wall time over --runs runs (one
warm-up run of each case first; the cases alternate within a run; the cache
and the output folder are emptied between runs, outside the timing), the
requests the proxies saw, and round trips counted three ways:

  wall/RTT     the wall time divided by the RTT
  added/RTT    (the median at this RTT - the median at 0 ms) / RTT: the time
               the delay added, without what the process does locally
  chain        the longest chain of requests of one run that do not overlap
               in time (each starts after the one before it ended), from the
               proxies' log: round trips that had to wait for each other.
               Printed for RTTs above 0 only: at 0 ms requests that could
               overlap often end before the next starts (the JSON has it)

Nothing here asserts on time: the output is a report (a table, and JSON with
--json).

  bench/latency.py --kernhub build-bench/kernhub --demo-hub build-bench/demo-hub
                   [--runs 15] [--rtt 0,50] [--cases fetch,torch]
                   [--torch-dir DIR --torch-runtime-dir DIR --torch-fixture SO]
                   [--label NAME] [--work DIR] [--json OUT]

--torch-dir, --torch-runtime-dir and --torch-fixture default to what the
test build in build/ uses (KERNHUB_TEST_TORCH_DIR and
KERNHUB_TEST_TORCH_RUNTIME_DIR in build/CMakeCache.txt, and its
tests/fixtures/out/torch). Python 3.10 or later, standard library only;
needs curl, openssl and objcopy.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIB = 1 << 20
ORG = "kh-test"
DEMO_REPO = f"{ORG}/vector-add"
TORCH_REPO = f"{ORG}/torch-op"
TORCH_NS = "_kh_torch_ops_9e1b2c7"
TORCH_LIBRARY_BYTES = 40 * MIB
MIN_RUNS = 15


def host_platform() -> str:
    machine = os.uname().machine
    return f"{'aarch64' if machine in ('aarch64', 'arm64') else 'x86_64'}-linux"


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        sys.exit(f"latency.py: {name} not found (.ci/install-deps installs it)")
    return path


def cache_entry(name: str) -> str:
    """A path from build/CMakeCache.txt, "" when there is none."""
    try:
        text = (ROOT / "build" / "CMakeCache.txt").read_text()
    except OSError:
        return ""
    m = re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.M)
    return m.group(1) if m else ""


def torch_variant(torch_dir: Path) -> str:
    m = re.search(r"__version__ = '(\d+)\.(\d+)", (torch_dir / "version.py").read_text())
    if not m:
        sys.exit(f"latency.py: no torch version in {torch_dir / 'version.py'}")
    return f"torch{m[1]}{m[2]}-cxx11-cpu-{host_platform()}"


def demo_library(demo_hub: Path) -> Path:
    found = sorted(demo_hub.resolve().glob("kernels/kernhub-demo/vector-add/resolve/*/build/native-cpu-*/libvector_add.so"))
    if not found:
        sys.exit(f"latency.py: no libvector_add.so in the demo hub {demo_hub} (--demo-hub)")
    return found[0]


def padded_library(fixture: Path, out: Path) -> Path:
    """The op library with a section of random bytes that brings it to 40 MiB."""
    padding = out.parent / "padding.bin"
    padding.write_bytes(os.urandom(TORCH_LIBRARY_BYTES - fixture.stat().st_size - 4096))
    subprocess.run([find_tool("objcopy"), "--add-section", f".kh_bench_padding={padding}", str(fixture), str(out)],
                   check=True)
    padding.unlink()
    return out


def torch_files(variant: str, library: Path) -> dict:
    """The 8 files of a kernel-builder-shaped torch variant (metadata.json is made by make_hub.py)."""
    d = f"build/{variant}/"
    layers = "".join(f"\n\nclass AddOne{i}(torch.nn.Module):\n    def forward(self, x):\n"
                     f"        return ops.add_one(x)\n" for i in range(64))
    return {
        d + "__init__.py": {"text": "import torch\n\nfrom ._ops import ops\nfrom . import layers\n\n\n"
                                    "def add_one(x: torch.Tensor) -> torch.Tensor:\n    return ops.add_one(x)\n"},
        d + "_ops.py": {"text": f"import torch\nfrom . import {TORCH_NS}\nops = torch.ops.{TORCH_NS}\n\n\n"
                                f"def add_op_namespace_prefix(op_name: str):\n    return f\"{TORCH_NS}::{{op_name}}\"\n"},
        d + "layers.py": {"text": "import torch\n\nfrom ._ops import ops\n" + layers},
        d + "utils.py": {"text": "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(100))},
        d + "_version.py": {"text": "__version__ = \"0.1.0\"\n"},
        d + "functional.py": {"text": "from ._ops import ops\n\n\ndef add_one(x):\n    return ops.add_one(x)\n"},
        d + f"{TORCH_NS}.abi3.so": {"path": str(library), "lfs": True},
    }


def make_tree(work: Path, demo_lib: Path, torch_setup) -> tuple[Path, dict]:
    variant = f"native-cpu-{host_platform()}"
    repos = [{"repo_id": DEMO_REPO, "type": "kernel",
              "commits": [{"message": "vector-add", "branches": ["main"], "metadata": True,
                           "files": {"README.md": {"text": "# vector-add\n"},
                                     f"build/{variant}/libvector_add.so": {"path": str(demo_lib), "lfs": True}}}]}]
    if torch_setup:
        repos.append({"repo_id": TORCH_REPO, "type": "kernel",
                      "commits": [{"message": "torch op", "branches": ["main"], "metadata": True,
                                   "files": torch_files(torch_setup["variant"], torch_setup["library"]),
                                   "metadata_extra": {"name": "torch-op", "python-depends": []}}]})
    spec = work / "spec.json"
    spec.write_text(json.dumps({"organizations": {ORG: {"trusted_kernel_publisher": True}}, "repos": repos}))
    tree = work / "hub"
    subprocess.run([sys.executable, str(ROOT / "examples/hub/make_hub.py"), "--spec", str(spec), "--out", str(tree)],
                   check=True)
    registry = {"format": 1, "kernels": {
        "bench-vector-add": {"repo_id": DEMO_REPO, "revision": "main", "symbol": "kh_vector_add",
                             "file": "libvector_add.so"},
        "bench-torch-op": {"repo_id": TORCH_REPO, "revision": "main", "symbol": "add_one"}}}
    (work / "registry.json").write_text(json.dumps(registry))
    return tree, json.loads((tree / "_hub.json").read_text())["repos"]


class Servers:
    """The hub server and the delay proxy in front of its two hosts."""

    def __init__(self, tree: Path):
        self.hub = subprocess.Popen([sys.executable, str(ROOT / "tests/support/hub_server.py"), "--root", str(tree)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        upstream = json.loads(self.hub.stdout.readline())
        self.proxy = subprocess.Popen([sys.executable, str(HERE / "delay_proxy.py"),
                                       "--route", f"hub,127.0.0.1,{upstream['endpoint']}",
                                       "--route", f"cdn,127.0.0.2,{upstream['cdn']}"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        routes = json.loads(self.proxy.stdout.readline())["routes"]
        self.endpoint, self.cdn = routes["hub"], routes["cdn"]

    def ask(self, line: str) -> dict:
        self.proxy.stdin.write(line + "\n")
        self.proxy.stdin.flush()
        answer = json.loads(self.proxy.stdout.readline())
        if "error" in answer:
            sys.exit(f"latency.py: delay proxy: {answer['error']}")
        return answer

    def stop(self):
        for proc in (self.proxy, self.hub):
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def file_urls(servers: Servers, repos: dict, repo: str, paths) -> list[str]:
    """Where each file's bytes end up being served: the CDN for LFS files, the hub for the rest."""
    commit = repos[repo]["branches"]["main"]
    entries = {e["path"]: e for e in repos[repo]["trees"][commit]}
    urls = []
    for path in paths:
        entry = entries[path]
        if "lfs" in entry:
            urls.append(f"{servers.cdn}/lfs/{entry['lfs']['oid']}?repo={quote(repo, safe='')}")
        else:
            urls.append(f"{servers.endpoint}/kernels/{repo}/resolve/{commit}/{quote(path)}")
    return urls


def clean_env(extra=None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KERNHUB_", "HF_", "KERNELS_")) and k.lower() not in ("http_proxy", "https_proxy",
                                                                                      "all_proxy", "no_proxy")
           and k != "LD_BIND_NOW"}
    env.update(extra or {})
    return env


def empty(path: Path):
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def timed(argv, env, cwd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()[-2000:]
        sys.exit(f"latency.py: {' '.join(str(a) for a in argv[:4])} ... failed ({proc.returncode}): {err}")
    return wall


def longest_chain(entries, rtt_s) -> int:
    """The most requests of one run that follow each other without overlapping in time.

    The proxy notes a request's end after the last byte is handed to the
    socket, so a client can send its next request a moment before that: a
    request counts as after another when it starts no earlier than half an
    RTT before the other's end (0.5 ms at 0 ms). Requests in flight together
    each last at least one RTT, so that slack never puts them in a row.
    """
    slack = max(rtt_s / 2, 0.0005)
    spans = sorted((e["start"], e["end"] or e["forwarded"] or e["start"]) for e in entries)
    best = []
    for i, (start, _) in enumerate(spans):
        best.append(1 + max((best[j] for j in range(i) if spans[j][1] - slack <= start), default=0))
    return max(best, default=0)


class Case:
    """One command line (or a pair: curl, then openssl) run the same way each time."""

    def __init__(self, key, name, steps, prepare, kind, env):
        self.key, self.name, self.steps, self.prepare, self.kind, self.env = key, name, steps, prepare, kind, env


def build_cases(args, servers, repos, work, torch_setup, tools):
    kh, registry = args.kernhub, str(work / "registry.json")
    cache, out = work / "cache", work / "out"
    common = ["--endpoint", servers.endpoint, "--cache-dir", str(cache), "--quiet"]
    demo_commit = repos[DEMO_REPO]["branches"]["main"]
    variant = f"native-cpu-{host_platform()}"
    env = clean_env()

    def floor(key, name, repo, paths):
        urls = file_urls(servers, repos, repo, paths)
        files = [str(out / f"f{i}") for i in range(len(urls))]
        curl = [tools["curl"], "-sS", "--fail", "--noproxy", "*", "--parallel", "--parallel-immediate",
                "--parallel-max", "16"]
        for url, target in zip(urls, files):
            curl += ["-o", target, url]
        return Case(key, name, [curl, [tools["openssl"], "dgst", "-sha256", *files]], lambda: empty(out), "floor", env)

    cases = []
    if "fetch" in args.cases:
        cases += [
            Case("fetch-branch", "fetch by branch", [[kh, "fetch", "bench-vector-add", "--registry", registry, *common]],
                 lambda: empty(cache), "kernhub", env),
            Case("fetch-commit", "fetch by commit", [[kh, "fetch", f"{DEMO_REPO}@{demo_commit}", *common]],
                 lambda: empty(cache), "kernhub", env),
            floor("floor-demo", "floor: curl --parallel + sha256, 2 files", DEMO_REPO,
                  [f"build/{variant}/metadata.json", f"build/{variant}/libvector_add.so"]),
        ]
    if torch_setup:
        torch_env = clean_env({"KERNHUB_TORCH_DIR": str(torch_setup["dir"]),
                               "LD_LIBRARY_PATH": str(torch_setup["runtime_dir"])})
        tv = torch_setup["variant"]
        warm_cache = work / "warm-cache"
        load = [kh, "load", "bench-torch-op", "--registry", registry, "--target", tv, "--endpoint", servers.endpoint,
                "--quiet"]
        # The warm load's cache is filled once, here (its runs ask the hub
        # nothing), by a load that must report the op registered in LibTorch.
        empty(warm_cache)
        filled = subprocess.run([*load, "--cache-dir", str(warm_cache), "--json"], env=torch_env, cwd=work,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True)
        try:
            loaded = json.loads(filled.stdout)
        except ValueError:
            loaded = {}
        if filled.returncode != 0 or loaded.get("kind") != "torch-op" or loaded.get("torch_op") != f"{TORCH_NS}::add_one":
            sys.exit(f"latency.py: the torch load did not load {TORCH_NS}::add_one (exit {filled.returncode}): "
                     f"{(filled.stdout + filled.stderr).strip()[-2000:]}")
        servers.ask("log")
        tree = repos[TORCH_REPO]["trees"][repos[TORCH_REPO]["branches"]["main"]]
        all_files = [e["path"] for e in tree if e["type"] == "file" and e["path"].startswith(f"build/{tv}/")]
        read_files = [f"build/{tv}/{name}" for name in (f"{TORCH_NS}.abi3.so", "metadata.json", "_ops.py")]
        cases += [
            Case("load-torch", "load torch, cold", [[*load, "--cache-dir", str(cache)]], lambda: empty(cache),
                 "kernhub", torch_env),
            Case("load-torch-warm", "load torch, warm --offline",
                 [[*load, "--cache-dir", str(warm_cache), "--offline"]], lambda: None, "kernhub", torch_env),
            floor("floor-torch-8", f"floor: curl --parallel + sha256, {len(all_files)} files", TORCH_REPO, all_files),
            floor("floor-torch-3", "floor: the 3 files a load reads", TORCH_REPO, read_files),
        ]
    return cases


def run_case(case, servers, work):
    case.prepare()
    servers.ask("log")  # nothing from before this run
    wall = sum(timed(argv, case.env, work) for argv in case.steps)
    log = servers.ask("log")
    entries = log["requests"]
    return wall, entries


def measure(args, cases, servers, work):
    results = []
    for rtt in args.rtt:
        servers.ask(f"rtt {rtt}")
        walls = {c.key: [] for c in cases}
        logs = {c.key: [] for c in cases}
        for warm_up in (True,) + (False,) * args.runs:
            for case in cases:
                wall, entries = run_case(case, servers, work)
                if not warm_up:
                    walls[case.key].append(wall)
                    logs[case.key].append(entries)
        for case in cases:
            first = min((e["start"] for e in logs[case.key][-1]), default=0.0)
            sample = [{k: (round(v - first, 4) if k in ("start", "forwarded", "end") and v is not None else v)
                       for k, v in e.items()} for e in logs[case.key][-1]]
            results.append({
                "case": case.key, "name": case.name, "kind": case.kind, "rtt_ms": rtt,
                "wall_s": walls[case.key], "median_s": statistics.median(walls[case.key]),
                "requests": [len(entries) for entries in logs[case.key]],
                "chain": [longest_chain(entries, rtt / 1000) for entries in logs[case.key]],
                "errors": sum(1 for entries in logs[case.key] for e in entries if e["error"]),
                "last_run_requests": sample,
            })
    return results


def spread(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{statistics.median(values):g} ({lo}-{hi})"


def report(results, header) -> str:
    zero = {r["case"]: r["median_s"] for r in results if r["rtt_ms"] == 0}
    floors = {"fetch-branch": "floor-demo", "fetch-commit": "floor-demo", "load-torch": "floor-torch-8"}
    by = {(r["case"], r["rtt_ms"]): r for r in results}
    lines = [*header, f"{'case':<44} {'RTT':>5} {'wall':>9} {'requests':>9} {'chain':>6} {'wall/RTT':>9} "
             f"{'added/RTT':>10} {'/ floor':>8}"]
    for r in results:
        rtt = r["rtt_ms"]
        wall = r["median_s"]
        per_rtt = f"{wall * 1000 / rtt:.1f}" if rtt else "-"
        added = f"{(wall - zero[r['case']]) * 1000 / rtt:.1f}" if rtt and r["case"] in zero else "-"
        floor = by.get((floors.get(r["case"]), rtt))
        ratio = f"{wall / floor['median_s']:.2f}" if floor else ""
        chain = spread(r["chain"]) if rtt else "-"
        lines.append(f"{r['name']:<44} {rtt:>3g}ms {wall * 1000:>7.1f}ms {spread(r['requests']):>9} "
                     f"{chain:>6} {per_rtt:>9} {added:>10} {ratio:>8}")
        if r["errors"]:
            lines.append(f"    ({r['errors']} requests failed in the proxy's log)")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernhub", required=True, help="the kernhub program to measure (a Release build)")
    parser.add_argument("--demo-hub", required=True, help="the demo hub tree (<build>/demo-hub), for its library")
    parser.add_argument("--runs", type=int, default=MIN_RUNS,
                        help=f"timed runs of each case at each RTT (default {MIN_RUNS})")
    parser.add_argument("--quick", action="store_true", help=f"allow --runs below {MIN_RUNS}, for a quick check")
    parser.add_argument("--rtt", default="0,50", help="added round-trip times in ms, comma-separated (default 0,50)")
    parser.add_argument("--cases", default="fetch,torch", help="fetch, torch or both (default fetch,torch)")
    parser.add_argument("--torch-dir", default=cache_entry("KERNHUB_TEST_TORCH_DIR"),
                        help="a torch package folder (default: KERNHUB_TEST_TORCH_DIR of build/)")
    parser.add_argument("--torch-runtime-dir", default=cache_entry("KERNHUB_TEST_TORCH_RUNTIME_DIR"),
                        help="the CUDA runtime libraries libtorch_cpu.so needs (default: build/'s)")
    parser.add_argument("--torch-fixture", default=str(ROOT / f"build/tests/fixtures/out/torch/{TORCH_NS}.abi3.so"),
                        help="the torch op library to pad (default: build/'s test fixture)")
    parser.add_argument("--label", help="a name for the kernhub build in the report (default: its path)")
    parser.add_argument("--work", help="scratch folder (default: a temporary folder)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if not 1 <= args.runs <= 1000:
        parser.error("--runs must be from 1 to 1000")
    if args.runs < MIN_RUNS and not args.quick:
        parser.error(f"medians of fewer than {MIN_RUNS} runs need --quick")
    try:
        args.rtt = [float(ms) for ms in args.rtt.split(",") if ms.strip()]
    except ValueError:
        parser.error("--rtt takes milliseconds, e.g. 0,50")
    if not args.rtt or len(args.rtt) > 10 or not all(0 <= ms <= 10_000 for ms in args.rtt):
        parser.error("--rtt takes 1 to 10 values from 0 to 10000 ms")
    args.cases = {c.strip() for c in args.cases.split(",") if c.strip()}
    if not args.cases or not args.cases <= {"fetch", "torch"}:
        parser.error("--cases takes fetch, torch or both")
    args.kernhub = str(Path(args.kernhub).resolve())
    tools = {"curl": find_tool("curl"), "openssl": find_tool("openssl")}

    work = Path(tempfile.mkdtemp(prefix="kernhub-latency-", dir=args.work))
    servers = None
    try:
        torch_setup, torch_why_not = None, ""
        if "torch" in args.cases:
            torch_dir, fixture = Path(args.torch_dir or "/nonexistent").resolve(), Path(args.torch_fixture).resolve()
            if not (torch_dir / "lib" / "libtorch_cpu.so").exists():
                torch_why_not = f"no LibTorch in {torch_dir} (--torch-dir)"
            elif not fixture.exists():
                torch_why_not = f"no torch op library {fixture} (--torch-fixture; the test build makes it)"
            else:
                (work / "lib").mkdir()
                torch_setup = {"dir": torch_dir, "runtime_dir": args.torch_runtime_dir,
                               "variant": torch_variant(torch_dir),
                               "library": padded_library(fixture, work / "lib" / f"{TORCH_NS}.abi3.so")}
        tree, repos = make_tree(work, demo_library(Path(args.demo_hub)), torch_setup)
        servers = Servers(tree)
        cases = build_cases(args, servers, repos, work, torch_setup, tools)
        load_before = os.getloadavg()
        started = time.monotonic()
        results = measure(args, cases, servers, work)
        elapsed = time.monotonic() - started
        load_after = os.getloadavg()
    finally:
        if servers:
            servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    header = [f"latency: {args.label or args.kernhub}; medians of {args.runs} runs at each RTT; "
              f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
              f"({elapsed:.0f} s)"]
    if torch_why_not:
        header.append(f"(torch load skipped: {torch_why_not})")
    text = report(results, header)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "kernhub": args.kernhub, "label": args.label, "runs": args.runs, "rtt_ms": args.rtt,
            "cpus": os.cpu_count(), "load_average_before": load_before, "load_average_after": load_after,
            "torch_skipped": torch_why_not or None, "results": results}, indent=2))


if __name__ == "__main__":
    main()
