#!/usr/bin/env python3
"""Print "X / baseline" ratio tables from a kernhub benchmark run.

Runs a Google Benchmark binary with --benchmark_format=json (or reads a JSON
file it wrote) and prints, for the pairs declared below for that binary, the
two times and their ratio. Both numbers of a ratio come from the same run.
No threshold is checked: the output is a report, not a test.

  ratios.py build-bench/bench/bench_load [--min-time 0.2] [--save out.json] [-- BENCHMARK ARGS...]
  ratios.py --json out.json [--binary bench_load]

With `-- --benchmark_repetitions=3` each benchmark runs three times and
every number is the median of the three (issue-sized comparisons of two
builds, "before" and "after", use that).

A ratio uses wall-clock time ("real"). Where neither side uses manual timing,
the CPU-time ratio is printed too: on a busy machine it is the steadier one
for CPU-bound cases (dispatch, load), while for network cases only wall time
means anything (the server is another process). Python 3 standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys

# Pairs per binary: (label, numerator, baseline). A name without "/" is a
# benchmark family: it is paired with the baseline family for every argument
# suffix both have ("/16", "/4096"). A name with "/" is one benchmark.
PAIRS = {
    "bench_parse": [
        ("op listing / one pass over the file", "BM_Parse_OpListing", "BM_Parse_ByteScan"),
        ("lock parse / nlohmann's own parse", "BM_Parse_Lock", "BM_Parse_JsonBaseline"),
    ],
    "bench_dispatch": [
        ("KernelFn / direct", "BM_Dispatch_KernelFn", "BM_Dispatch_Direct"),
        ("Client::resolve / direct", "BM_Dispatch_ClientResolve", "BM_Dispatch_Direct"),
        ("kh_symbol pointer (C API) / direct", "BM_Dispatch_CSymbol", "BM_Dispatch_Direct"),
        ("dlsym pointer / direct", "BM_Dispatch_DlsymPointer", "BM_Dispatch_Direct"),
        ("KernelFn / dlsym pointer", "BM_Dispatch_KernelFn", "BM_Dispatch_DlsymPointer"),
    ],
    "bench_tvm_dispatch": [
        ("raw TVM FFI safe call / plain pointer", "BM_TvmDispatch_RawSafeCall", "BM_TvmDispatch_PlainPointer"),
        ("TvmFunction / plain pointer", "BM_TvmDispatch_TvmFunction", "BM_TvmDispatch_PlainPointer"),
        ("kh_tvm_call (C API) / plain pointer", "BM_TvmDispatch_KhTvmCall", "BM_TvmDispatch_PlainPointer"),
        ("TvmFunction / raw TVM FFI safe call", "BM_TvmDispatch_TvmFunction", "BM_TvmDispatch_RawSafeCall"),
        ("kh_tvm_call (C API) / raw TVM FFI safe call", "BM_TvmDispatch_KhTvmCall", "BM_TvmDispatch_RawSafeCall"),
        ("add_one on DLTensors (TvmFunction) / kh_vector_add pointer", "BM_TvmDispatch_TensorTvmFunction",
         "BM_TvmDispatch_TensorPlainPointer"),
    ],
    "bench_torch_dispatch": [
        ("typed handle / direct C++ call", "BM_TorchDispatch_TypedHandle", "BM_TorchDispatch_Direct"),
        ("lookup each call / direct C++ call", "BM_TorchDispatch_LookupEachCall", "BM_TorchDispatch_Direct"),
        ("lookup each call / typed handle", "BM_TorchDispatch_LookupEachCall", "BM_TorchDispatch_TypedHandle"),
    ],
    "bench_load": [
        ("bare dlopen: other name (known) / same name", "BM_Load_BareDlopen_OtherPath",
         "BM_Load_BareDlopen_AlreadyOpen"),
        ("bare dlopen: new name, inode match / same name", "BM_Load_BareDlopen_NewName",
         "BM_Load_BareDlopen_AlreadyOpen"),
        ("bare dlopen: first open / already open", "BM_Load_BareDlopen_FirstOpen",
         "BM_Load_BareDlopen_AlreadyOpen"),
        ("load_warm / bare_dlopen (already open)", "BM_Load_Kernhub_Warm", "BM_Load_BareDlopen_AlreadyOpen"),
        ("load_warm / bare_dlopen (first open)", "BM_Load_Kernhub_Warm", "BM_Load_BareDlopen_FirstOpen"),
        ("load_first_open / bare_dlopen (first open, new file)", "BM_Load_Kernhub_FirstOpen",
         "BM_Load_BareDlopen_FirstOpenNewFile"),
        ("fetch_warm_offline / bare_dlopen (already open)", "BM_Fetch_Kernhub_WarmOffline",
         "BM_Load_BareDlopen_AlreadyOpen"),
        ("fetch_warm_offline / bare_dlopen (first open)", "BM_Fetch_Kernhub_WarmOffline",
         "BM_Load_BareDlopen_FirstOpen"),
        ("client_construct / bare_dlopen (first open)", "BM_Client_Construct", "BM_Load_BareDlopen_FirstOpen"),
        ("new client + load / bare_dlopen (first open)", "BM_Load_Kernhub_FreshClient",
         "BM_Load_BareDlopen_FirstOpen"),
        ("fetch_warm_offline / load_warm (share of load)", "BM_Fetch_Kernhub_WarmOffline", "BM_Load_Kernhub_Warm"),
    ],
    "bench_startup": [
        ("kernhub load --offline / bare dlopen (C++)", "BM_Start_Kernhub_Cli", "BM_Start_BareDlopen_Cxx"),
        ("kernhub load --offline / bare dlopen (C)", "BM_Start_Kernhub_Cli", "BM_Start_BareDlopen_C"),
        ("C API example / bare dlopen (C)", "BM_Start_Kernhub_CApi", "BM_Start_BareDlopen_C"),
        ("C API example / bare dlopen (C++)", "BM_Start_Kernhub_CApi", "BM_Start_BareDlopen_Cxx"),
        ("bare dlopen: C++ / C (the C++ runtime)", "BM_Start_BareDlopen_Cxx", "BM_Start_BareDlopen_C"),
    ],
    "bench_fetch": [
        ("warm_fetch(branch) / curl_get", "BM_Fetch_Kernhub_WarmBranch", "BM_Fetch_CurlGet"),
        ("warm_fetch(commit) / curl_get", "BM_Fetch_Kernhub_WarmCommit", "BM_Fetch_CurlGet"),
        ("cold_fetch / curl_cold", "BM_Fetch_Kernhub_Cold", "BM_Fetch_CurlCold"),
        ("cold_fetch / curl_cold+fsync", "BM_Fetch_Kernhub_Cold", "BM_Fetch_CurlColdFsync"),
        ("curl_cold+fsync / curl_cold", "BM_Fetch_CurlColdFsync", "BM_Fetch_CurlCold"),
    ],
}

# The goals some ratios are held to (docs/performance.md "Benchmarks"); shown beside them.
TARGETS = {
    "KernelFn / direct": 1.05,
    "kh_symbol pointer (C API) / direct": 1.05,
    "load_warm / bare_dlopen (first open)": 1.3,
    "kernhub load --offline / bare dlopen (C++)": 1.3,
    # Issue 42: a warm CLI start at most 1.3x a bare C dlopen + dlsym.
    "kernhub load --offline / bare dlopen (C)": 1.3,
    "C API example / bare dlopen (C++)": 1.3,
    "C API example / bare dlopen (C)": 2.0,
}

# Suffixes Google Benchmark appends that do not tell cases apart.
NOISE = re.compile(r"/(manual_time|real_time|iterations:\d+|min_time:[0-9.]+s?|repeats:\d+)")
TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def normalise(name):
    return NOISE.sub("", name)


def family_and_suffix(name):
    head, _, rest = name.partition("/")
    return head, ("/" + rest) if rest else ""


def fmt_time(ns):
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt_ratio(value):
    if value is None:
        return "-"
    return f"{value:.3g}x" if value < 100 else f"{value:.0f}x"


def load_rows(report):
    """One row per benchmark. With --benchmark_repetitions=N (N > 1) a row
    holds the median of the N runs (Google Benchmark's "median" aggregate),
    so one slow run on a busy machine does not move a ratio."""
    rows = {}
    medians = {}
    for bench in report.get("benchmarks", []):
        if bench.get("run_type") == "aggregate" and bench.get("aggregate_name") == "median":
            medians[normalise(bench.get("run_name", bench["name"]))] = bench
    for bench in report.get("benchmarks", []):
        if bench.get("run_type", "iteration") != "iteration":
            continue  # the aggregates were read above
        name = normalise(bench["name"])
        bench = medians.get(name, bench)
        scale = TO_NS.get(bench.get("time_unit", "ns"), 1.0)
        manual = "/manual_time" in bench["name"]
        rows[name] = {
            "name": name,
            "error": bench.get("error_message") if bench.get("error_occurred") else None,
            "real": bench.get("real_time", 0.0) * scale,
            "cpu": None if manual else bench.get("cpu_time", 0.0) * scale,
            "iterations": bench.get("iterations"),
            "counters": {k: v for k, v in bench.items() if k in ("requests", "bytes", "server_requests", "floats")},
        }
    return rows


def expand(pairs, rows):
    """Yields (label, numerator row name, baseline row name) for the pairs present."""
    for label, num, base in pairs:
        if "/" in num or "/" in base:
            if num in rows and base in rows:
                yield label, num, base
            continue
        for name in rows:
            fam, suffix = family_and_suffix(name)
            if fam == num and base + suffix in rows:
                yield (label + (f"  [{suffix[1:]}]" if suffix else ""), name, base + suffix)


def table(headers, body):
    widths = [max(len(str(r[i])) for r in [headers] + body) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)), line]
    for r in body:
        out.append("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def special_rows(binary, rows):
    """Derived rows that are differences rather than ratios."""
    out = []
    if binary == "bench_fetch" and "BM_Store_AtomicSmallWrite" in rows:
        write = rows["BM_Store_AtomicSmallWrite"]["real"]
        warm, curl = rows.get("BM_Fetch_Kernhub_WarmBranch"), rows.get("BM_Fetch_CurlGet")
        if warm and curl and not warm["error"] and not curl["error"]:
            extra = warm["real"] - curl["real"]
            out.append(
                f"warm_fetch(branch) - curl_get = {fmt_time(extra)}; "
                f"one atomic 40-byte write (temp+fsync+rename+fsync dir) = {fmt_time(write)} "
                f"(ratio {fmt_ratio(extra / write if write else None)})"
            )
    return out


def report_tables(binary, report):
    rows = load_rows(report)
    ctx = report.get("context", {})
    print(f"== {binary}  ({ctx.get('date', '')}, {ctx.get('num_cpus', '?')} CPUs, "
          f"load avg {', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}, "
          f"library build: {ctx.get('library_build_type', '?')})")
    body = []
    for r in rows.values():
        counters = " ".join(f"{k}={v:.4g}" for k, v in r["counters"].items())
        if r["error"]:
            body.append([r["name"], "error", "", "", r["error"]])
        else:
            body.append([r["name"], fmt_time(r["real"]), fmt_time(r["cpu"]), r["iterations"], counters])
    print(table(["benchmark", "real", "cpu", "iterations", "counters"], body))
    print()
    body = []
    for label, num, base in expand(PAIRS.get(binary, []), rows):
        a, b = rows[num], rows[base]
        goal = TARGETS.get(label.split("  [")[0])
        goal_text = f"<= {goal:g}x" if goal else ""
        if a["error"] or b["error"]:
            body.append([label, fmt_time(a["real"]), fmt_time(b["real"]), "error", "-", goal_text])
            continue
        real = a["real"] / b["real"] if b["real"] else None
        cpu = a["cpu"] / b["cpu"] if a["cpu"] and b["cpu"] else None
        if goal and real is not None:
            goal_text += " met" if real <= goal else " NOT met"
        body.append([label, fmt_time(a["real"]), fmt_time(b["real"]), fmt_ratio(real), fmt_ratio(cpu), goal_text])
    if body:
        print(table(["ratio (X / baseline)", "X", "baseline", "real", "cpu (this process)", "goal"], body))
    else:
        print("(no declared pairs for this binary)")
    for line in special_rows(binary, rows):
        print(line)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary_path", nargs="?", help="benchmark binary to run")
    parser.add_argument("--json", help="read this JSON report instead of running a binary")
    parser.add_argument("--binary", help="which pair table to use (default: from the path or the report)")
    parser.add_argument("--min-time", default="0.2", help="--benchmark_min_time in seconds (default 0.2)")
    parser.add_argument("--save", help="also write the JSON report here")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)

    if args.json:
        with open(args.json, encoding="utf-8") as f:
            report = json.load(f)
        source = args.json
    elif args.binary_path:
        cmd = [args.binary_path, "--benchmark_format=json", f"--benchmark_min_time={args.min_time}", *extra]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, check=False)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} exited with {done.returncode}")
        report = json.loads(done.stdout)
        source = args.binary_path
        if args.save:
            with open(args.save, "w", encoding="utf-8") as f:
                f.write(done.stdout.decode())
    else:
        parser.error("give a benchmark binary or --json FILE")

    binary = args.binary or os.path.basename(report.get("context", {}).get("executable", "") or source)
    binary = re.sub(r"\.json$", "", binary)
    report_tables(binary, report)


if __name__ == "__main__":
    main()
