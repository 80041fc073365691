#!/usr/bin/env python3
"""kernhub's variant selection against the real `kernels` library's.

The `kernels` side is its pure function
kernels.variants._resolve_variant_for_system, fed with parse_variant's
results and a backend object from kernels.backends; it needs no torch. The
kernhub side is select_oracle (tests/select/select_oracle.cpp: the library's
parse_host_spec and select_variant) for the generated cases, and
`kernhub info ORG/REPO --host ... --json` against a loopback hub for a
sample of them.

Cases are drawn with a fixed seed from the whole variant grammar of the
families `kernels` defines (torchMM with and without -cxx11/-cxx98,
torch-stable-abiMM, tvm-ffiMM, torch-<backend>, torch-universal; backends
cu/rocm/xpu/cpu/metal and more; x86_64/aarch64; linux/darwin/windows), on
hosts with and without torch, CUDA and tvm-ffi. The draw is biased towards
variants near the host, so that most cases have a match. The rule: for
every case, kernhub chooses what `kernels` chooses (or nothing when it
does). docs/registry.md ("Variant selection") lists where kernhub's own rules differ,
which is only for its native family.

Usage: test_kernels_selection.py --kernhub CLI --so LIB.so --make-hub make_hub.py
           --hub-server hub_server.py --oracle select_oracle [--cases N] [--info-cases N] [--seed S]
Exit 77 (skipped) when this interpreter has no kernels 0.17.
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import interop_support as support

CUDA = [(11, 8), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0), (13, 2)]
ROCM = [(6, 3), (6, 4), (7, 0)]
XPU = [(2025, 0), (2025, 1)]
TORCH = [(2, 7), (2, 8), (2, 9), (2, 10), (2, 12), (2, 15)]
TVM_FFI = [(0, 1), (0, 2)]
MACOS = [(15, 1), (26, 0), (26, 2)]
OTHER_BACKENDS = ["metal", "neuron", "tpu", "cann81"]
NOARCH_WORDS = ["cpu", "cuda", "rocm", "xpu", "metal", "npu", "neuron", "tpu", "noarch"]


def draw_host(rng):
    host = {"cpu": rng.choices(["x86_64", "aarch64"], [8, 2])[0],
            "os": rng.choices(["linux", "darwin", "windows"], [8, 1, 1])[0]}
    kind = rng.choices(["cpu", "cuda", "rocm", "xpu", "metal"], [35, 45, 8, 7, 5 if host["os"] != "darwin" else 40])[0]
    if kind in ("cuda", "rocm", "xpu"):
        host[kind] = rng.choice({"cuda": CUDA, "rocm": ROCM, "xpu": XPU}[kind])
    elif kind == "metal":
        host["metal"] = True
    if rng.random() < 0.7:
        host["torch"] = rng.choice(TORCH)
        abi = rng.choices([True, False, None], [8, 1, 1] if host["os"] == "linux" else [1, 1, 8])[0]
        if abi is not None:
            host["cxx11-abi"] = abi
    if rng.random() < 0.4:
        host["tvm-ffi"] = rng.choice(TVM_FFI)
    if host["os"] == "darwin" and rng.random() < 0.7:
        host["macos"] = rng.choice(MACOS)
    return host


def host_spec(host):
    parts = []
    for key, value in host.items():
        if isinstance(value, tuple):
            value = f"{value[0]}.{value[1]}"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f"{key}={value}")
    return ",".join(parts)


def backend_word(host, rng, near):
    """A backend spelling: the host's (or a fitting CUDA minor) when near, else any."""
    if near:
        if "cuda" in host:
            major, minor = host["cuda"]
            return f"cu{major}{rng.randint(0, minor)}" if rng.random() < 0.5 else f"cu{major}{minor}"
        for kind in ("rocm", "xpu"):
            if kind in host:
                return f"{kind}{host[kind][0]}{host[kind][1]}"
        return "metal" if host.get("metal") else "cpu"
    pool = [f"cu{a}{b}" for a, b in CUDA] + [f"rocm{a}{b}" for a, b in ROCM] + [f"xpu{a}{b}" for a, b in XPU]
    return rng.choice(pool + ["cpu"] * 4 + OTHER_BACKENDS)


def draw_variant(host, rng):
    near = rng.random() < 0.7
    family = rng.choices(["torch", "stable", "tvm", "noarch", "universal"], [35, 25, 15, 15, 10])[0]
    if family == "universal":
        return "torch-universal"
    if family == "noarch":
        word = {"cuda": "cuda", "rocm": "rocm", "xpu": "xpu", "metal": "metal"}
        host_word = next((w for k, w in word.items() if k in host), "cpu")
        return "torch-" + (host_word if near and rng.random() < 0.6 else rng.choice(NOARCH_WORDS))
    cpu = host["cpu"] if near or rng.random() < 0.5 else rng.choice(["x86_64", "aarch64"])
    os_ = host["os"] if near or rng.random() < 0.5 else rng.choice(["linux", "darwin", "windows"])
    arch = f"{backend_word(host, rng, near)}-{cpu}-{os_}"
    torch = host.get("torch") if near and "torch" in host else rng.choice(TORCH)
    if family == "torch":
        tag = rng.choices(["", "-cxx11", "-cxx98"], [4, 4, 2])[0]
        return f"torch{torch[0]}{torch[1]}{tag}-{arch}"
    if family == "stable":
        older = [t for t in TORCH if t <= torch] if near else TORCH
        abi = rng.choice(older)
        return f"torch-stable-abi{abi[0]}{abi[1]}-{arch}"
    tvm = host.get("tvm-ffi") if near and "tvm-ffi" in host else rng.choice(TVM_FFI)
    return f"tvm-ffi{tvm[0]}{tvm[1]}-{arch}"


def draw_case(rng):
    host = draw_host(rng)
    names = []
    for _ in range(rng.randint(1, 8)):
        name = draw_variant(host, rng)
        if name not in names:  # a repo's variants are folder names: unique
            names.append(name)
    return host, names


def kernels_choice(host, names):
    """What kernels 0.17 chooses among names on host: a name, or None."""
    from packaging.version import Version
    from kernels.backends import CPU, CUDA as KCuda, Metal, ROCm, XPU as KXpu
    from kernels.variants import _resolve_variant_for_system, parse_variant

    def version(pair):
        return Version(f"{pair[0]}.{pair[1]}") if pair else None

    if "cuda" in host:
        backend = KCuda(version=version(host["cuda"]))
    elif "rocm" in host:
        backend = ROCm(version=version(host["rocm"]))
    elif "xpu" in host:
        backend = KXpu(version=version(host["xpu"]))
    elif host.get("metal"):
        backend = Metal()
    else:
        backend = CPU()
    parsed = []
    for name in names:
        try:
            parsed.append((parse_variant(name), name))
        except ValueError:
            pass  # as kernels' get_variants: an invalid name is left out
    applicable, _ = _resolve_variant_for_system(
        variants=[variant for variant, _ in parsed], selected_backend=backend, cpu=host["cpu"], os=host["os"],
        torch_version=version(host.get("torch")), torch_cxx11_abi=host.get("cxx11-abi"),
        tvm_ffi_version=version(host.get("tvm-ffi")), macos_version=version(host.get("macos")))
    if not applicable:
        return None
    return next(name for variant, name in parsed if variant is applicable[0])


def check_library(report, oracle, cases):
    """Every case through select_oracle; one check for all of them."""
    lines = "".join(f"{host_spec(host)}\t{' '.join(names)}\n" for host, names, _ in cases)
    done = subprocess.run([oracle], input=lines, capture_output=True, text=True, timeout=120)
    answers = done.stdout.splitlines()
    if not report.equal(len(answers), len(cases), "select_oracle answers every case"):
        return
    mismatches = []
    for (host, names, want), got in zip(cases, answers):
        got = None if got == "-" else got
        if got != want:
            mismatches.append(f"host {host_spec(host)}, variants {names}: kernels {want!r}, kernhub {got!r}")
    matched = sum(1 for _, _, want in cases if want is not None)
    report.info(f"{len(cases)} generated cases, {matched} with a variant kernels accepts "
                f"({100 * matched // len(cases)} %), {len(cases) - matched} with none")
    for line in mismatches[:20]:
        report.diff(line)
    report.check(not mismatches, f"kernhub's library chooses what kernels chooses in all {len(cases)} cases",
                 f"{len(mismatches)} differ")


def info_spec(cases):
    repos = []
    for i, (_, names, _) in enumerate(cases):
        files = {f"build/{name}/kernel.txt": {"text": name} for name in names}
        repos.append({"repo_id": f"diff/case-{i}", "type": "kernel",
                      "commits": [{"message": "variants", "branches": ["main"], "files": files}]})
    return {"organizations": {"diff": {"trusted_kernel_publisher": True}}, "repos": repos}


def check_info(report, args, cases, work):
    """A sample through `kernhub info --host ... --json` on a loopback hub."""
    with support.served_hub(args, info_spec(cases), work / "hub") as (server, _):
        # A torch folder that is not one: were this machine's torch asked
        # for under --host, every run would fail with exit 2.
        env = support.clean_env(KERNHUB_TORCH_DIR=str(work / "no-torch-here"))
        for i, (host, names, want) in enumerate(cases):
            done = support.kernhub(args.kernhub, ["info", f"diff/case-{i}", "--host", host_spec(host), "--json",
                                                  "--endpoint", server.endpoint, "--cache-dir", str(work / "cache")],
                                   env)
            what = f"info --host {host_spec(host)} on {names}"
            if not report.check(done.returncode == 0, what + " exits 0", done.stderr.strip()):
                continue
            out = json.loads(done.stdout)
            shape = all(isinstance(v.get("selected"), bool) and (v["selected"] or isinstance(v.get("reason"), str))
                        for v in out["variants"])
            chosen = [v["name"] for v in out["variants"] if v["selected"]]
            report.check(out["selected"] == want and chosen == ([want] if want else []) and shape
                         and sorted(v["name"] for v in out["variants"]) == sorted(names),
                         what + f" selects {want!r} as kernels does", json.dumps(out)[:400])


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--oracle", required=True, help="the select_oracle executable")
    parser.add_argument("--cases", type=int, default=12000)
    parser.add_argument("--info-cases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    args = support.parse_args(parser)
    try:
        import kernels  # noqa: F401
        from kernels.variants import _resolve_variant_for_system  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.17 ({e})")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    from importlib.metadata import version
    # The rules docs/registry.md states are kernels 0.17.2's (tests/requirements.txt pins it).
    report.equal(version("kernels"), "0.17.2", "the peer is kernels 0.17.2")
    rng = random.Random(args.seed)
    cases = []
    for _ in range(args.cases):
        host, names = draw_case(rng)
        cases.append((host, names, kernels_choice(host, names)))
    check_library(report, args.oracle, cases)
    # The sample: the first cases, half with a match and half without when
    # there are enough of each.
    with_match = [c for c in cases if c[2] is not None][: args.info_cases - args.info_cases // 4]
    without = [c for c in cases if c[2] is None][: args.info_cases // 4]
    with tempfile.TemporaryDirectory(prefix="kernhub-select-") as tmp:
        check_info(report, args, with_match + without, Path(tmp))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
