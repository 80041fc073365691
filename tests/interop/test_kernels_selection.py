#!/usr/bin/env python3
"""kernhub's variant selection against the real `kernels` library's.

The `kernels` side is its pure function
kernels._internals.variants._resolve_variant_for_system, fed with its own
parse_variant's results and a backend object from
kernels._internals.backends; it needs no torch. The kernhub side is
select_oracle (tests/select/select_oracle.cpp: the library's
parse_host_spec, select_variant and the rules it applies) for the
generated cases, and `kernhub info ORG/REPO --host ... --json` against a
loopback hub for a sample of them.

Cases are drawn with a fixed seed from the whole grammar of the families
`kernels` defines, in both its legacy (torch28-cxx11-cu128-x86_64-linux)
and dotted (torch-2.10-cxx11-cuda-12.8-cpython-3.9-abi3-x86_64-linux)
forms: torch with and without -cxx11/-cxx98, torch-stable-abi, tvm-ffi,
torch- and mlx-<backend>, universal, and the four SDK forms; every backend
(cuda, rocm, xpu, cann, cpu, metal, neuron, tpu); abi3 and abi3t Python
tags; a few malformed names. Hosts vary the backend, torch, tvm-ffi,
macOS, the Python version, free-threading and MLX. The draw is biased
towards variants near the host, so that most cases have a match. The rule:
for every case kernhub chooses what `kernels` chooses (or nothing when it
does), and its rules accept the same variants in the same order.
docs/registry.md ("Variant selection") lists where kernhub's own rules
differ, which is only for its native family, which no case holds.

Two planted rule changes in the peer (abi3t ranked before abi3; the
Python tag's minimum version ignored) must each make the comparison fail:
that shows it can. So must one on kernhub's side: select_oracle --plant
abi3t-first ranks by kernhub's own key with abi3t before abi3.

Usage: test_kernels_selection.py --kernhub CLI --so LIB.so --make-hub make_hub.py
           --hub-server hub_server.py --oracle select_oracle [--cases N] [--info-cases N] [--seed S]
Exit 77 (skipped) when this interpreter has no kernels 0.19.
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import interop_support as support

PEER = "0.19.1"  # the kernels release kernhub follows (deptree::k_kernels_release)

CUDA = [(11, 8), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0), (13, 2)]
ROCM = [(6, 3), (6, 4), (7, 0), (7, 1), (7, 14)]
XPU = [(2025, 0), (2025, 1)]
CANN = [(8, 1), (8, 2)]
TORCH = [(2, 7), (2, 8), (2, 9), (2, 10), (2, 12), (2, 15), (3, 0)]
TVM_FFI = [(0, 1), (0, 2)]
MACOS = [(15, 1), (26, 0), (26, 2)]
PYTHON = [(3, 9), (3, 10), (3, 12), (3, 13), (3, 15), (3, 16)]
VERSIONED = {"cuda": CUDA, "rocm": ROCM, "xpu": XPU, "cann": CANN}
UNVERSIONED = ["cpu", "metal", "neuron", "tpu"]
NOARCH_WORDS = ["cpu", "cuda", "rocm", "xpu", "cann", "metal", "npu", "neuron", "tpu", "universal", "noarch"]
MALFORMED = ["torch28-cu1-x86_64-linux", "torch-2.10-cuda-12.8-x86_64-linux", "sdk-cuda-12.8",
             "torch-2.10-cuda-12.8-cpython-3.12-abi3t-x86_64-linux", "tvm-ffi-cu128-x86_64-linux",
             "torch28-npu-aarch64-linux", "mlx", "torch-stable-abi-2.11-cu128-cpython-3.9-abi3-x86_64-linux"]


def draw_host(rng):
    host = {"cpu": rng.choices(["x86_64", "aarch64"], [8, 2])[0],
            "os": rng.choices(["linux", "darwin", "windows"], [8, 1, 1])[0]}
    kinds = ["cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu"]
    kind = rng.choices(kinds, [30, 40, 8, 6, 4, 5 if host["os"] != "darwin" else 40, 3, 3])[0]
    if kind in VERSIONED:
        host[kind] = rng.choice(VERSIONED[kind])
    elif kind != "cpu":
        host[kind] = True
    if rng.random() < 0.7:
        host["torch"] = rng.choice(TORCH)
        abi = rng.choices([True, False, None], [8, 1, 1] if host["os"] == "linux" else [1, 1, 8])[0]
        if abi is not None:
            host["cxx11-abi"] = abi
    if rng.random() < 0.4:
        host["tvm-ffi"] = rng.choice(TVM_FFI)
    if host["os"] == "darwin" and rng.random() < 0.7:
        host["macos"] = rng.choice(MACOS)
    if rng.random() < 0.6:
        host["python"] = rng.choice(PYTHON)
        if host["python"] >= (3, 13) and rng.random() < 0.3:
            host["free-threaded"] = True
    if rng.random() < 0.3:
        host["mlx"] = True
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


def host_backend(host):
    """(kind, version or None) of the host's backend."""
    for kind in list(VERSIONED) + UNVERSIONED[1:]:
        if kind in host:
            return kind, host[kind] if kind in VERSIONED else None
    return "cpu", None


def spell_backend(kind, version, legacy):
    if version is None:
        return kind
    major, minor = version
    if legacy:
        return f"{'cu' if kind == 'cuda' else kind}{major}{minor}"
    return f"{kind}-{major}.{minor}"


def draw_backend(host, rng, near):
    """A backend (kind, version): the host's (or a fitting minor) when near, else any."""
    kind, version = host_backend(host)
    if near:
        if kind in ("cuda", "rocm") and rng.random() < 0.5:
            fitting = [v for v in VERSIONED[kind] if v[0] == version[0] and v[1] <= version[1]]
            return kind, rng.choice(fitting)
        return kind, version
    kind = rng.choice(list(VERSIONED) + UNVERSIONED + ["cpu"] * 3)
    return kind, rng.choice(VERSIONED[kind]) if kind in VERSIONED else None


def draw_python(host, rng, near):
    version = rng.choice(PYTHON[:4] if near else PYTHON)
    abi = "abi3t" if version >= (3, 15) and (host.get("free-threaded") or rng.random() < 0.4) else "abi3"
    return f"cpython-{version[0]}.{version[1]}-{abi}"


def draw_variant(host, rng):
    near = rng.random() < 0.7
    family = rng.choices(["torch", "stable", "tvm", "noarch", "universal", "sdk", "malformed"],
                         [30, 20, 12, 12, 6, 15, 5])[0]
    if family == "malformed":
        return rng.choice(MALFORMED)
    if family == "universal":
        return rng.choice(["torch-universal", "torch-universal", "mlx-universal"])
    kind, version = draw_backend(host, rng, near)
    if family == "noarch":
        framework = "mlx" if rng.random() < 0.25 else "torch"
        return f"{framework}-" + (kind if near and rng.random() < 0.7 else rng.choice(NOARCH_WORDS))
    cpu = host["cpu"] if near or rng.random() < 0.5 else rng.choice(["x86_64", "aarch64"])
    os_ = host["os"] if near or rng.random() < 0.5 else rng.choice(["linux", "darwin", "windows"])
    if family == "sdk":
        form = rng.choice(["sdk", "word", "compiled", "compiled-any"])
        if form == "sdk":
            return "sdk"
        if form == "word":
            return "sdk-" + (kind if near else rng.choice(NOARCH_WORDS))
        backend = "" if form == "compiled-any" else spell_backend(kind, version, False) + "-"
        return f"sdk-{backend}{draw_python(host, rng, near)}-{cpu}-{os_}"
    legacy = rng.random() < 0.5
    backend = spell_backend(kind, version, legacy)
    python = "" if legacy else draw_python(host, rng, near) + "-"
    arch = f"{backend}-{python}{cpu}-{os_}"
    torch = host.get("torch") if near and "torch" in host else rng.choice(TORCH)
    if family == "torch":
        tag = rng.choices(["", "-cxx11", "-cxx98"], [4, 4, 2])[0]
        if legacy and torch[0] > 9:
            torch = (2, 8)
        return (f"torch{torch[0]}{torch[1]}" if legacy else f"torch-{torch[0]}.{torch[1]}") + f"{tag}-{arch}"
    if family == "stable":
        abi = rng.choice([t for t in TORCH if t <= torch] if near else TORCH)
        return (f"torch-stable-abi{abi[0]}{abi[1]}" if legacy else f"torch-stable-abi-{abi[0]}.{abi[1]}") + f"-{arch}"
    tvm = host.get("tvm-ffi") if near and "tvm-ffi" in host else rng.choice(TVM_FFI)
    return (f"tvm-ffi{tvm[0]}{tvm[1]}" if legacy else f"tvm-ffi-{tvm[0]}.{tvm[1]}") + f"-{arch}"


def draw_case(rng):
    host = draw_host(rng)
    names = []
    for _ in range(rng.randint(1, 8)):
        name = draw_variant(host, rng)
        # Now and then the same build for the other Python tag, which only
        # the tie-breaks order.
        twin = name.replace("-abi3-", "-abi3t-") if "-cpython-3.15-abi3-" in name else None
        for candidate in [name] + ([twin] if twin and rng.random() < 0.5 else []):
            if candidate not in names:  # a repo's variants are folder names: unique
                names.append(candidate)
    return host, names


def kernels_accepted(host, names, resolve=None):
    """What kernels accepts among names on host, in its preference order."""
    from packaging.version import Version
    from kernels._internals import backends
    from kernels._internals.variants import _resolve_variant_for_system, parse_variant

    def version(pair):
        return Version(f"{pair[0]}.{pair[1]}") if pair else None

    kind, pair = host_backend(host)
    backend = {"cuda": lambda: backends.CUDA(version=version(pair)), "rocm": lambda: backends.ROCm(version=version(pair)),
               "xpu": lambda: backends.XPU(version=version(pair)), "cann": lambda: backends.CANN(version=version(pair)),
               "cpu": backends.CPU, "metal": backends.Metal, "neuron": backends.Neuron, "tpu": backends.TPU}[kind]()
    parsed = []
    for name in names:
        try:
            parsed.append((parse_variant(name), name))
        except ValueError:
            pass  # as kernels' get_variants: an invalid name is left out
    applicable, _ = (resolve or _resolve_variant_for_system)(
        variants=[variant for variant, _ in parsed], selected_backend=backend, cpu=host["cpu"], os=host["os"],
        torch_version=version(host.get("torch")), torch_cxx11_abi=host.get("cxx11-abi"),
        tvm_ffi_version=version(host.get("tvm-ffi")), macos_version=version(host.get("macos")),
        python_version=version(host.get("python", (3, 15))), free_threaded=host.get("free-threaded", False),
        has_mlx=host.get("mlx", False))
    return [next(name for variant, name in parsed if variant is chosen) for chosen in applicable]


def planted_resolve(rule):
    """The peer's pure function with one rule changed."""
    from kernels._internals import variants

    def abi3t_first(python):
        return (-variants._PYTHON_ABIS.index(python.abi), -python.version.major, -python.version.minor)

    original_mismatch = variants._python_mismatch

    def no_minimum(python, python_version, free_threaded):
        return original_mismatch(python, max(python_version, python.version), free_threaded)

    name, replacement = {"abi3t-first": ("_python_order", abi3t_first),
                         "no-python-minimum": ("_python_mismatch", no_minimum)}[rule]

    def resolve(**kwargs):
        original = getattr(variants, name)
        setattr(variants, name, replacement)
        try:
            return variants._resolve_variant_for_system(**kwargs)
        finally:
            setattr(variants, name, original)
    return resolve


def oracle_answers(oracle, cases, plant=None):
    lines = "".join(f"{host_spec(host)}\t{' '.join(names)}\n" for host, names, _ in cases)
    done = subprocess.run([oracle] + (["--plant", plant] if plant else []), input=lines, capture_output=True,
                          text=True, timeout=120)
    answers = []
    for line in done.stdout.splitlines():
        chosen, _, fits = line.partition("\t")
        answers.append((None if chosen == "-" else chosen, fits.split()))
    return answers


def differences(cases, answers):
    found = []
    for (host, names, want), (chosen, fits) in zip(cases, answers):
        first = want[0] if want else None
        if chosen != first or fits != want:
            found.append(f"host {host_spec(host)}, variants {names}: kernels {want!r}, "
                         f"kernhub chooses {chosen!r} and accepts {fits!r}")
    return found


def check_library(report, oracle, cases):
    """Every case through select_oracle; one check for all of them."""
    answers = oracle_answers(oracle, cases)
    if not report.equal(len(answers), len(cases), "select_oracle answers every case"):
        return
    mismatches = differences(cases, answers)
    matched = sum(1 for _, _, want in cases if want)
    dotted = sum(1 for _, names, _ in cases if any("cpython" in n for n in names))
    sdk = sum(1 for _, names, _ in cases if any(n.startswith("sdk") for n in names))
    report.info(f"{len(cases)} generated cases, {matched} with a variant kernels accepts "
                f"({100 * matched // len(cases)} %), {len(cases) - matched} with none; {dotted} hold a dotted name, "
                f"{sdk} an SDK")
    for line in mismatches[:20]:
        report.diff(line)
    report.check(not mismatches, f"kernhub chooses what kernels chooses, and accepts the same variants in the "
                 f"same order, in all {len(cases)} cases", f"{len(mismatches)} differ")
    for rule in ("abi3t-first", "no-python-minimum"):
        resolve = planted_resolve(rule)
        planted = [(host, names, kernels_accepted(host, names, resolve)) for host, names, _ in cases]
        caught = len(differences(planted, answers))
        report.check(caught > 0, f"a planted rule change in the peer ({rule}) is caught: {caught} cases differ",
                     "the comparison cannot tell the rules apart")
    planted = oracle_answers(oracle, cases, "abi3t-first")
    caught = len(differences(cases, planted)) if len(planted) == len(cases) else 0
    report.check(caught > 0, f"a planted rule change in kernhub (abi3t-first) is caught: {caught} cases differ",
                 f"the comparison cannot tell the rules apart ({len(planted)} answers)")


ARCH_WORDS = ["7.5", "8.0", "8.6", "8.9", "9.0", "9.0a", "10.0", "10.0a", "10.0f", "10.3f", "12.0", "12.0f",
              "8.0+PTX", "9.0+PTX", "9.0a+PTX", "10.0f+PTX", "sm_90", "gfx90a", "9", "", "x.0", "9.x"]
CAPABILITIES = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0), (12, 1)]


def check_cuda_archs(report, oracle, rng, count=3000):
    """kernels' device arch check (_supports_cuda_capability) against kernhub's."""
    from kernels._internals.archs import _supports_cuda_capability
    cases = [([a for a in rng.sample(ARCH_WORDS, rng.randint(1, 5)) if a], rng.choice(CAPABILITIES))
             for _ in range(count)]
    cases = [(archs, cc) for archs, cc in cases if archs]
    lines = "".join(f"{' '.join(archs)}\t{cc[0]}.{cc[1]}\n" for archs, cc in cases)
    done = subprocess.run([oracle, "--cuda-archs"], input=lines, capture_output=True, text=True, timeout=60)
    got = done.stdout.split()
    want = ["1" if _supports_cuda_capability(archs, cc) else "0" for archs, cc in cases]
    differ = [f"archs {archs}, capability {cc}: kernels {w}, kernhub {g}"
              for (archs, cc), w, g in zip(cases, want, got) if w != g]
    for line in differ[:10]:
        report.diff(line)
    report.check(len(got) == len(cases) and not differ,
                 f"the device arch check decides as kernels' in all {len(cases)} cases "
                 f"({want.count('0')} refused)", f"{len(differ)} differ, {len(got)} answers")


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
            want = want[0] if want else None
            report.check(out["selected"] == want and chosen == ([want] if want else []) and shape
                         and sorted(v["name"] for v in out["variants"]) == sorted(names),
                         what + f" selects {want!r} as kernels does", json.dumps(out)[:400])


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--oracle", required=True, help="the select_oracle executable")
    parser.add_argument("--cases", type=int, default=12000)
    parser.add_argument("--info-cases", type=int, default=24)
    parser.add_argument("--seed", type=int, default=2026)
    args = support.parse_args(parser)
    try:
        import kernels  # noqa: F401
        from kernels._internals.variants import _resolve_variant_for_system  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.19 ({e})")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    from importlib.metadata import version
    # The rules docs/registry.md states are this release's (tests/requirements.txt pins it).
    report.equal(version("kernels"), PEER, f"the peer is kernels {PEER}")
    rng = random.Random(args.seed)
    cases = []
    for _ in range(args.cases):
        host, names = draw_case(rng)
        cases.append((host, names, kernels_accepted(host, names)))
    check_library(report, args.oracle, cases)
    check_cuda_archs(report, args.oracle, rng)
    # The sample: the first cases, half with a match and half without when
    # there are enough of each.
    with_match = [c for c in cases if c[2]][: args.info_cases - args.info_cases // 4]
    without = [c for c in cases if not c[2]][: args.info_cases // 4]
    with tempfile.TemporaryDirectory(prefix="kernhub-select-") as tmp:
        check_info(report, args, with_match + without, Path(tmp))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
