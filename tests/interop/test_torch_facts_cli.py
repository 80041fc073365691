#!/usr/bin/env python3
"""The CLI selects torch variants from the torch it finds, as kernels would.

A Python environment holding a torch package's files (torch 2.15.0's own
version.py, CUDA 13.2, and a libc10.so built with the C++11 ABI) is all
kernhub needs: on this machine, which has no GPU, `kernhub fetch` with no
flag picks the CUDA variant that the real kernels library's selection picks
for that torch (its pure function, fed the same facts), `kernhub info` says
where each fact came from, KERNHUB_BACKEND=cpu and KERNHUB_TORCH_DIR change
the choice as they should, and --host mistakes are exit 2.

Usage: test_torch_facts_cli.py --kernhub CLI --so LIB.so --make-hub make_hub.py
           --hub-server hub_server.py --cxx11-lib libkh_cxx11.so
Exit 77 (skipped) when this interpreter has no kernels 0.19.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import interop_support as support

VERSION_PY = ("from typing import Optional\n__version__ = '2.15.0+cu132'\ndebug = False\n"
              "cuda: Optional[str] = '13.2'\nhip: Optional[str] = None\nxpu: Optional[str] = None\n")
VARIANTS = ["torch215-cxx11-cu132-x86_64-linux", "torch215-cxx11-cpu-x86_64-linux",
            "torch-stable-abi212-cu130-x86_64-linux", "torch215-cu130-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux"]


def kernels_pick(backend, torch, abi):
    from packaging.version import Version
    from kernels._internals.backends import CPU, CUDA
    from kernels._internals.variants import _resolve_variant_for_system, parse_variant
    chosen, _ = _resolve_variant_for_system(
        [parse_variant(v) for v in VARIANTS], CUDA(version=Version(backend)) if backend else CPU(), "x86_64", "linux",
        Version(torch), abi, None, python_version=Version("3.11"), has_mlx=False)
    return chosen[0].variant_str if chosen else None


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--cxx11-lib", required=True)
    args = support.parse_args(parser)
    try:
        from kernels._internals.variants import _resolve_variant_for_system  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.19 ({e})")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    spec = {"repos": [{"repo_id": "demo/flash", "type": "kernel", "commits": [{
        "message": "torch variants", "branches": ["main"], "metadata": True,
        "metadata_extra": {"python-depends": []},
        "files": {f"build/{v}/__init__.py": {"text": f"# {v}\n"} for v in VARIANTS}}]}]}
    with tempfile.TemporaryDirectory(prefix="kernhub-torch-facts-") as tmp:
        work = Path(tmp)
        venv = work / "venv"
        torch_dir = venv / "lib" / "python3.11" / "site-packages" / "torch"
        (torch_dir / "lib").mkdir(parents=True)
        (torch_dir / "version.py").write_text(VERSION_PY)
        shutil.copy(args.cxx11_lib, torch_dir / "lib" / "libc10.so")
        with support.served_hub(args, spec, work / "hub") as (server, _):
            common = ["--endpoint", server.endpoint, "--cache-dir", str(work / "cache"), "--json"]
            env = support.clean_env(VIRTUAL_ENV=str(venv), HOME=str(work / "home"))

            want = kernels_pick("13.2", "2.15", True)
            done = support.kernhub(args.kernhub, ["fetch", "demo/flash", *common], env)
            got = json.loads(done.stdout)["variant"] if done.returncode == 0 else done.stderr.strip()
            report.equal(got, want, "fetch with no flag picks kernels' variant for the environment's CUDA torch")

            done = support.kernhub(args.kernhub, ["info", "demo/flash", *common], env)
            facts = {f["name"]: (f["value"], f["source"]) for f in json.loads(done.stdout)["host_facts"]}
            report.equal(facts.get("torch"), ("2.15", str(torch_dir / "version.py")), "info names torch and its file")
            report.equal(facts.get("cxx11-abi"), ("true", str(torch_dir / "lib" / "libc10.so")),
                         "info names the ABI and the library it was read from")
            report.equal(facts.get("backend"), ("cu132", f"torch's build ({torch_dir / 'version.py'})"),
                         "info says torch's build decided the backend")
            done = support.kernhub(args.kernhub, ["info", "demo/flash", "--endpoint", server.endpoint,
                                                  "--cache-dir", str(work / "cache")], env)
            report.check(f"torch 2.15  ({torch_dir / 'version.py'})" in done.stdout, "info's text shows the torch fact",
                         done.stdout)

            env_cpu = dict(env, KERNHUB_BACKEND="cpu")
            done = support.kernhub(args.kernhub, ["fetch", "demo/flash", *common], env_cpu)
            got = json.loads(done.stdout)["variant"] if done.returncode == 0 else done.stderr.strip()
            report.equal(got, kernels_pick(None, "2.15", True), "KERNHUB_BACKEND=cpu picks what kernels' backend='cpu' picks")

            libtorch = work / "libtorch"
            libtorch.mkdir()
            (libtorch / "build-version").write_text("2.9.1+cpu\n")
            env_dir = dict(env, KERNHUB_TORCH_DIR=str(libtorch))
            done = support.kernhub(args.kernhub, ["fetch", "demo/flash", *common], env_dir)
            got = json.loads(done.stdout)["variant"] if done.returncode == 0 else done.stderr.strip()
            report.equal(got, kernels_pick(None, "2.9", None), "KERNHUB_TORCH_DIR (a LibTorch root) wins over the venv")

            done = support.kernhub(args.kernhub, ["fetch", "demo/flash", *common], dict(env, KERNHUB_TORCH_DIR=str(work)))
            report.check(done.returncode == 2 and "KERNHUB_TORCH_DIR names" in done.stderr,
                         "a KERNHUB_TORCH_DIR that is no torch is exit 2 naming it", done.stderr)
            done = support.kernhub(args.kernhub, ["info", "demo/flash", "--host", "cpu=x86_64,os=linux",
                                                  "--target", VARIANTS[0], *common], env)
            report.check(done.returncode == 2 and "--host" in done.stderr and "--target" in done.stderr,
                         "--host with --target is exit 2 naming both", done.stderr)
            done = support.kernhub(args.kernhub, ["lock", "--host", "cpu=x86_64,cuda=13.0", "--endpoint",
                                                  server.endpoint], env)
            report.check(done.returncode == 2 and "needs both cpu and os" in done.stderr and "--host" in done.stderr,
                         "a --host without os is exit 2 naming it", done.stderr)
            done = support.kernhub(args.kernhub, ["info", "demo/flash", "--host",
                                                  "cpu=x86_64,os=linux,cuda=13.0,torch=2.15,cxx11-abi=true", *common], env)
            out = json.loads(done.stdout) if done.returncode == 0 else {}
            report.equal(out.get("selected"), kernels_pick("13.0", "2.15", True),
                         "info --host selects for the described GPU node, not for the venv's torch")
            report.check(all(f["source"] == "host description" for f in out.get("host_facts", [{}])),
                         "under --host every fact comes from the description")

            gpu_node = "cpu=x86_64,os=linux,cuda=13.0,torch=2.15,cxx11-abi=true"
            done = support.kernhub(args.kernhub, ["mirror", "demo/flash", "--to", str(work / "mirror"), "--host",
                                                  gpu_node, *common], env)
            out = json.loads(done.stdout) if done.returncode == 0 else {"kernels": [{"variants": done.stderr}]}
            report.equal(out["kernels"][0]["variants"], [kernels_pick("13.0", "2.15", True)],
                         "mirror --host mirrors the one variant that machine selects")
            project = work / "project"
            project.mkdir()
            (project / "kernhub.json").write_text(json.dumps(
                {"format": 1, "kernels": {"flash": {"repo_id": "demo/flash", "revision": "main", "symbol": "f"}}}))
            done = support.kernhub(args.kernhub, ["lock", "--project", str(project), "--host", gpu_node,
                                                  "--endpoint", server.endpoint, "--cache-dir", str(work / "cache")],
                                   env)
            lock = (project / "kernhub.lock").read_text() if done.returncode == 0 else done.stderr
            locked = [v for v in VARIANTS if v in lock]
            report.equal(locked, [kernels_pick("13.0", "2.15", True)], "lock --host locks that machine's variant")
            done = support.kernhub(args.kernhub, ["prewarm", "--project", str(project), "--host", gpu_node,
                                                  "--endpoint", server.endpoint, "--cache-dir", str(work / "cache2")],
                                   env)
            variant_dirs = sorted(p.name for p in (work / "cache2").glob("kernels--demo--flash/snapshots/*/build/*"))
            report.equal(variant_dirs if done.returncode == 0 else done.stderr, [kernels_pick("13.0", "2.15", True)],
                         "prewarm --host fetches that machine's locked variant")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
