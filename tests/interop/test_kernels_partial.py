#!/usr/bin/env python3
"""Interop: kernels 0.19.1 never meets the part of a variant a kernhub load fetched.

The hub (examples/hub/make_hub.py, served by tests/support/hub_server.py)
holds kernhub-interop/partial, branch v1 (also main): one tvm-ffi variant
under the dotted name kernels 0.19 selects on this host, holding a
pure-Python package (__init__.py, layers.py) for kernels and the tvm-ffi
fixture library (_kh_tvm_ops_*.so) for kernhub, with metadata.json.

1. `kernhub load` asks the hub for metadata.json and the library only, links
   them under .kernhub/partial/<commit>/ and leaves the snapshot without the
   variant; `kernhub cache ls` and `cache verify` report no damage.
2. kernels 0.19.1 offline (HF_HUB_OFFLINE=1) finds no cached snapshot and
   says so; it raises no digest error over a variant held in part.
3. kernels 0.19.1 online, on a copy of that cache, downloads the variant
   itself and loads it.
4. `kernhub fetch` asks only for the two files the load left on the hub,
   links the whole variant into the snapshot and clears the partial area;
   kernels 0.19.1 then loads it offline, its digest check included.

Usage: test_kernels_partial.py --kernhub CLI --so LIB.so --make-hub make_hub.py --hub-server hub_server.py
       --tvm-so FIXTURE.so --tvm-runtime libtvm_ffi.so
Exit 77 (skipped) when this interpreter has no kernels 0.19 or the build has
no tvm-ffi fixture.
"""

import json
import platform
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

import interop_support as support

TIMEOUT = 90
ORG = "kernhub-interop"
REPO = f"{ORG}/partial"
FOLDER = "kernels--kernhub-interop--partial"
CPU = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                                                             platform.machine())
VARIANT = f"tvm-ffi-0.1-cpu-cpython-3.9-abi3-{CPU}-linux"

LOAD = """
import json, sys
import kernels
module = kernels.get_kernel(sys.argv[1], version=1, backend="cpu")
print(json.dumps({"variant": module.VARIANT, "sum": module.vector_add([1, 2, 3], [10, 20, 30])}))
"""

PACKAGE = (f"VARIANT = {VARIANT!r}\n\n\n"
           "def vector_add(a, b):\n"
           "    return [x + y for x, y in zip(a, b)]\n")


def hub_spec(tvm_so):
    files = {f"build/{VARIANT}/__init__.py": {"text": PACKAGE},
             f"build/{VARIANT}/layers.py": {"text": "LAYERS = []\n"},
             f"build/{VARIANT}/{Path(tvm_so).name}": {"path": str(Path(tvm_so).resolve()), "lfs": True}}
    return {"organizations": {ORG: {"trusted_kernel_publisher": True}},
            "repos": [{"repo_id": REPO, "type": "kernel",
                       "commits": [{"message": "v1", "branches": ["v1", "main"], "metadata": True,
                                    "metadata_extra": {"version": 1, "python-depends": []}, "files": files}]}]}


def files_requested(server):
    """The variant files the hub was asked for since the last reset."""
    marker = f"/build/{VARIANT}/"
    out = set()
    for r in server.control("/_stats")["requests"]:
        path = urllib.parse.unquote(r["path"])
        if marker in path:
            out.add(path.split(marker, 1)[1].split("?", 1)[0])
    return out


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--tvm-so", default="")
    parser.add_argument("--tvm-runtime", default="")
    args = support.parse_args(parser)
    try:
        from kernels._rust import DigestReceiptStore  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.19 ({e})")
    if not args.tvm_so or not Path(args.tvm_so).is_file() or not Path(args.tvm_runtime).is_file():
        return support.skipped("the build has no tvm-ffi fixture library or runtime (apache-tvm-ffi missing)")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    with tempfile.TemporaryDirectory(prefix="kernhub-partial-") as name:
        tmp = Path(name)
        with support.served_hub(args, hub_spec(args.tvm_so), tmp / "hub") as (server, _index):
            run_checks(report, args, tmp, server)
    return report.finish()


def run_checks(report, args, tmp, server):
    cache = tmp / "cache"
    registry = tmp / "registry.json"
    registry.write_text(json.dumps({"format": 1, "kernels": {
        "partial": {"repo_id": REPO, "version": 1, "symbol": "add_one"}}}))

    def kh(*argv, **env):
        return support.kernhub(args.kernhub, list(argv), support.clean_env(
            KERNHUB_TVM_FFI_LIBRARY=args.tvm_runtime, **env), timeout=TIMEOUT)

    def kernels(what, cache_dir, **env):
        p = support.run_python(LOAD, support.kernels_env(tmp, HF_HUB_CACHE=cache_dir, **env), REPO, timeout=TIMEOUT)
        return p, support.last_json(p.stdout) or {}

    common = ["--endpoint", server.endpoint, "--cache-dir", str(cache), "--registry", str(registry)]
    server.control("/_reset", b"{}")
    load = kh("load", "partial", *common, "--json")
    report.info(f"kernhub load: {load.stdout.strip()[:600]}")
    report.check(load.returncode == 0, "kernhub load of the tvm-ffi variant succeeds", support.tail(load))
    if load.returncode != 0:
        return
    result = json.loads(load.stdout)
    fetched = result.get("fetch", result)
    commit = fetched.get("commit", "")
    library = Path(args.tvm_so).name
    report.equal(files_requested(server), {"metadata.json", library},
                 "the load asked the hub for metadata.json and the library only")
    folder = cache / FOLDER
    report.equal(tree(folder / ".kernhub" / "partial" / commit / "build" / VARIANT), sorted(["metadata.json", library]),
                 "the load linked them under .kernhub/partial/<commit>/build/<variant>")
    report.check(not (folder / "snapshots" / commit / "build" / VARIANT).exists(),
                 "the snapshot holds nothing of the variant", str(tree(folder / "snapshots")))
    ls = kh("cache", "ls", "--cache-dir", str(cache))
    report.info(f"kernhub cache ls:\n{ls.stdout}")
    report.check(ls.returncode == 0, "kernhub cache ls succeeds over the partial area", support.tail(ls))
    verify = kh("cache", "verify", "--cache-dir", str(cache), "--json")
    problems = json.loads(verify.stdout).get("problems") if verify.stdout.startswith("{") else None
    report.check(verify.returncode == 0 and problems == [], "kernhub cache verify reports no damage",
                 support.tail(verify))

    online_copy = tmp / "online-cache"
    shutil.copytree(cache, online_copy, symlinks=True)

    p, out = kernels("offline", cache, HF_HUB_OFFLINE=1)
    report.info(f"kernels offline after the load: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    report.check(p.returncode != 0 and "Cannot find a local snapshot" in p.stderr
                 and "igest" not in p.stderr.splitlines()[-1],
                 "kernels 0.19.1 offline finds no cached snapshot and says so, with no digest error",
                 support.tail(p))

    p, out = kernels("online", online_copy, HF_ENDPOINT=server.endpoint)
    report.info(f"kernels online after the load: exit {p.returncode}: {out}")
    report.check(p.returncode == 0 and out.get("sum") == [11, 22, 33] and out.get("variant") == VARIANT,
                 "kernels 0.19.1 online downloads the variant itself and loads it", support.tail(p))

    server.control("/_reset", b"{}")
    fetch = kh("fetch", "partial", *common, "--json")
    report.info(f"kernhub fetch: {fetch.stdout.strip()[:600]}")
    report.check(fetch.returncode == 0, "kernhub fetch completes the variant", support.tail(fetch))
    report.equal(files_requested(server), {"__init__.py", "layers.py"},
                 "the fetch asked the hub only for the files the load left there")
    report.equal(tree(folder / "snapshots" / commit / "build" / VARIANT),
                 sorted(["__init__.py", "layers.py", "metadata.json", library]),
                 "the snapshot holds the whole variant")
    report.check(not (folder / ".kernhub" / "partial" / commit / f"{VARIANT}.json").exists()
                 and not (folder / ".kernhub" / "partial" / commit / "build").exists(),
                 "the partial record and links are gone", str(tree(folder / ".kernhub" / "partial")))
    p, out = kernels("offline", cache, HF_HUB_OFFLINE=1)
    report.info(f"kernels offline after the fetch: exit {p.returncode}: {out}")
    report.check(p.returncode == 0 and out.get("sum") == [11, 22, 33],
                 "kernels 0.19.1 then loads the variant offline, its digest check included", support.tail(p))


if __name__ == "__main__":
    sys.exit(main())
