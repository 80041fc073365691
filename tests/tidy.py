#!/usr/bin/env python3
"""Runs clang-tidy (the checks in .clang-tidy) over src/ and cli/; fails on any finding.

    tests/tidy.py                 every .cpp file in src/ and cli/
    tests/tidy.py FILE...         only these files
    tests/tidy.py --no-cache      ignore the stamps and check every file again
    tests/tidy.py --record        also write tests/tidy-clean.txt (committed)
    tests/tidy.py -j N            N clang-tidy processes (default: the CPU count)

The compile commands come from a CMake configure (no build) of build-tidy/.
A file that comes out clean leaves a stamp named by a hash of everything its
result depends on: the clang-tidy binary and version, .clang-tidy, this
script, the file's compile command, and the bytes of the file and of every
header it includes, system headers too (the compiler's -M dependency
output), with the checkout's path taken out. The next run skips a file
whose stamp exists, so a warm run with no change costs one preprocessor pass
per file. tests/tidy-clean.txt, written by --record and committed, holds the
same keys, so a fresh clone on the same toolchain (CI) checks only the files
whose inputs changed since it was written. See CONTRIBUTING.md, "Static analysis".
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLANG_TIDY = os.environ.get("KERNHUB_CLANG_TIDY", "clang-tidy")
CLEAN_LIST = os.path.join(ROOT, "tests", "tidy-clean.txt")
# Compiler warnings belong to the gcc build (-Werror there); clang-tidy's own
# clang front end would otherwise turn clang-only warnings into errors.
EXTRA_ARGS = ["--extra-arg=-Wno-error", "--extra-arg=-Wno-unknown-warning-option"]


def sh(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


# Each source file on its own, and the crash points' real code. Given on
# every configure: a build folder configured earlier with other values
# (unity units, hooks off) would otherwise keep them.
CONFIGURE_FLAGS = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DKERNHUB_BUILD_TESTS=OFF", "-DKERNHUB_BUILD_BENCH=OFF",
                   "-DKERNHUB_UNITY=OFF", "-DKERNHUB_TEST_HOOKS=ON", "-DKERNHUB_SANITIZE=OFF", "-DKERNHUB_TSAN=OFF"]


def configure(build):
    generator = [] if os.path.exists(os.path.join(build, "CMakeCache.txt")) else ["-G", "Ninja"]
    sh(["cmake", "-S", ROOT, "-B", build, *generator, *CONFIGURE_FLAGS])


def compile_entries(build):
    """file -> compile command; for a file compiled twice (crash_point.cpp,
    hooks on and off) the hooks-on command, which holds the real code."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        listed = json.load(f)
    entries = {}
    for e in listed:
        path = os.path.normpath(e["file"])
        command = e.get("command", " ".join(e.get("arguments", [])))
        if path not in entries or "-DKERNHUB_TEST_HOOKS=1" in command:
            entries[path] = e
    return entries


def sources(folder):
    """The .cpp files of a top-level folder, as the build globs them."""
    found = []
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        found += [os.path.join(dirpath, n) for n in names if n.endswith(".cpp")]
    return sorted(found)


def sha256_file(path, memo={}):
    if path not in memo:
        with open(path, "rb") as f:
            memo[path] = hashlib.sha256(f.read()).hexdigest()
    return memo[path]


def dependencies(entry):
    """Every header a translation unit includes, from the compiler's -M output."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out_index = args.index("-o") if "-o" in args else None
    if out_index is not None:
        del args[out_index:out_index + 2]
    args = [a for a in args if a != "-c"] + ["-M", "-MG"]
    out = sh(args, cwd=entry["directory"])
    names = shlex.split(out.replace("\\\n", " "))[1:]
    return sorted({os.path.normpath(os.path.join(entry["directory"], n)) for n in names})


def portable(text):
    """The checkout's own path taken out, so a key holds in another clone."""
    return text.replace(ROOT, "@ROOT@")


def stamp_key(entry, common):
    h = hashlib.sha256(common.encode())
    h.update(portable(entry.get("command", " ".join(entry.get("arguments", [])))).encode())
    # In an order that does not depend on where the checkout lies.
    for dep in sorted(dependencies(entry), key=portable):
        h.update(portable(dep).encode() + b"\0")
        h.update(sha256_file(dep).encode() if os.path.exists(dep) else b"missing")
    return h.hexdigest()


def read_clean_list():
    """Keys of tests/tidy-clean.txt: "<key> <file>" per line."""
    try:
        with open(CLEAN_LIST) as f:
            return {line.split()[0] for line in f if line.strip() and not line.startswith("#")}
    except FileNotFoundError:
        return set()


def write_clean_list(clean):
    with open(CLEAN_LIST + ".tmp", "w") as f:
        f.write("# Written by tests/tidy.py --record: the input hash of every file that came\n"
                "# out clean (see CONTRIBUTING.md, \"Static analysis\"). A file whose\n"
                "# inputs changed since is checked again.\n")
        for path, key in sorted(clean.items()):
            f.write(f"{key} {os.path.relpath(path, ROOT)}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(CLEAN_LIST + ".tmp", CLEAN_LIST)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--record", action="store_true",
                        help="rewrite tests/tidy-clean.txt from this run (every file must be clean)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build-tidy"))
    opts = parser.parse_args()

    start = time.monotonic()
    configure(opts.build)
    entries = compile_entries(opts.build)
    if opts.files:
        wanted = [os.path.normpath(os.path.abspath(p)) for p in opts.files]
        missing = [p for p in wanted if p not in entries]
        if missing:
            sys.exit("tests/tidy.py: no compile command for " + ", ".join(missing) +
                     " (only .cpp files in src/ and cli/ are checked)")
    else:
        wanted = sources("src") + sources("cli")
        # A file the build does not compile on its own (a unity unit hiding
        # it, a glob that missed it) would otherwise pass unchecked.
        uncompiled = [p for p in wanted if p not in entries]
        if uncompiled:
            sys.exit("tests/tidy.py: " + os.path.relpath(opts.build, ROOT) + " has no compile command for " +
                     ", ".join(os.path.relpath(p, ROOT) for p in uncompiled) +
                     " (is it configured with -DKERNHUB_UNITY=OFF?)")

    compiler = shlex.split(entries[wanted[0]].get("command", ""))[:1] or ["c++"]
    # clang-tidy --version also names the CPU it runs on ("Host CPU: ..."),
    # which says nothing about the result and differs between CI machines.
    tidy_version = "".join(line for line in sh([CLANG_TIDY, "--version"]).splitlines(keepends=True)
                           if "Host CPU" not in line)
    common = "\0".join([
        tidy_version,
        sh(compiler + ["--version"]),
        sha256_file(os.path.join(ROOT, ".clang-tidy")),
        sha256_file(os.path.abspath(__file__)),
        " ".join(EXTRA_ARGS),
    ])
    stamps = os.environ.get("KERNHUB_TIDY_CACHE", os.path.join(opts.build, "tidy-stamps"))
    os.makedirs(stamps, exist_ok=True)

    committed = set() if opts.no_cache else read_clean_list()

    def check(path):
        key = stamp_key(entries[path], common)
        stamp = os.path.join(stamps, key)
        if not opts.no_cache and (key in committed or os.path.exists(stamp)):
            return path, key, True, 0, ""
        run = subprocess.run([CLANG_TIDY, "-p", opts.build, "--quiet", *EXTRA_ARGS, path],
                             capture_output=True, text=True)
        if run.returncode == 0:
            with open(stamp, "w") as f:
                f.write(os.path.relpath(path, ROOT) + "\n")
        # Everything on stdout is a finding; stderr only says how many warnings
        # in system headers were suppressed.
        return path, key, False, run.returncode, run.stdout + (run.stderr if run.returncode else "")

    failed, cached, keys, clean = [], 0, set(), {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.j)) as pool:
        # Findings are printed as each file finishes.
        for done in concurrent.futures.as_completed([pool.submit(check, p) for p in wanted]):
            path, key, hit, rc, out = done.result()
            keys.add(key)
            if rc == 0:
                clean[path] = key
            cached += hit
            if rc != 0:
                failed.append(path)
                sys.stdout.write(out)
                sys.stdout.flush()
    if not opts.files:
        # Stamps of older versions of the files are never hit again.
        for name in os.listdir(stamps):
            if name not in keys:
                os.remove(os.path.join(stamps, name))

    if opts.record:
        if opts.files or failed:
            sys.exit("tests/tidy.py: --record needs a run over every file with no finding")
        write_clean_list(clean)
    seconds = time.monotonic() - start
    print(f"tests/tidy.py: {len(wanted)} files, {cached} unchanged since a clean run, "
          f"{len(failed)} with findings, {seconds:.1f} s")
    for path in sorted(failed):
        print("  " + os.path.relpath(path, ROOT))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
