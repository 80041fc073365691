#!/usr/bin/env python3
"""Interop: kernels 0.19.1 loads offline the dotted-name and zip-layout variants kernhub prewarmed.

The hub (examples/hub/make_hub.py, served by tests/support/hub_server.py)
holds two kernel repos of a trusted organisation, each with branch v1 (also
main):

- kernhub-interop/dotted: tvm-ffi variants under the dotted names of kernels
  0.19 (tvm-ffi-0.1-cpu-cpython-3.9-abi3-<cpu>-linux and CUDA 12.0/13.0
  ones) and a torch-universal fallback, each a pure-Python package;
- kernhub-interop/zipped: torch-universal in the zip build layout, its
  package in <id>.zip;
- kernhub-interop/sdk: the SDK variants sdk, sdk-cpu and sdk-cuda;
- kernhub-interop/sha512: torch-universal whose metadata.json digest is
  SHA-512, computed by kernels 0.19.1 itself (Digest.hash_variant), and
  kernhub-interop/sha512-changed: the same digest over a changed file.

For each repo: kernels 0.19.1 (in a child process, as in real use) says
which variant it selects here (get_kernel_variants, and the one
`kernels variants --json` marks preferred), and `kernhub info --host <the facts kernels
used> --json` selects the same one; `kernels lock` writes kernels.lock;
`kernhub prewarm --lock --target <that variant>` fills an empty cache; with
the hub stopped and HF_HUB_OFFLINE=1, kernels get_kernel(version=1) loads
the variant from that cache (its own digest check included) and calls it.
Both tools refuse sha512-changed (kernels online, kernhub fetch exit 4).
kernhub fetch takes the SDK variant like any other (and kernhub lock and
prewarm without --target select it), info --json gives its
load_refusal and kernhub load is exit 7 saying why. Then kernhub reads
offline the cache kernels has used: `cache verify`
reports no damage, the verification receipts kernels wrote included.

Usage: test_kernels_layouts.py --kernhub CLI --so LIB.so --make-hub make_hub.py --hub-server hub_server.py
Exit 77 (skipped) when this interpreter has no kernels 0.19.
"""

import io
import json
import platform
import sys
import tempfile
import zipfile
from pathlib import Path

import interop_support as support

TIMEOUT = 90
ORG = "kernhub-interop"
DOTTED = f"{ORG}/dotted"
ZIPPED = f"{ORG}/zipped"
SDK = f"{ORG}/sdk"
SHA512 = f"{ORG}/sha512"
SHA512_CHANGED = f"{ORG}/sha512-changed"
ZIP_ID = "_zipped_4f2e"
CPU = platform.machine()


def package(variant):
    return (f"VARIANT = {variant!r}\n\n\n"
            f"def vector_add(a, b):\n"
            f"    return [x + y for x, y in zip(a, b)]\n")


def dotted_files():
    files = {}
    for backend in ("cpu", "cuda-12.0", "cuda-13.0"):
        variant = f"tvm-ffi-0.1-{backend}-cpython-3.9-abi3-{CPU}-linux"
        files[f"build/{variant}/__init__.py"] = {"text": package(variant)}
    files["build/torch-universal/__init__.py"] = {"text": package("torch-universal")}
    return files


def zipped_files(tmp):
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__init__.py", package("torch-universal (zip)"))
    path = tmp / f"{ZIP_ID}.zip"
    path.write_bytes(data.getvalue())
    return {f"build/torch-universal/{ZIP_ID}.zip": {"path": str(path)}}


# The SHA-512 digest kernels 0.19.1 computes over a variant folder, as its
# builds record it in metadata.json.
SHA512_DIGEST = """
import json, sys
from kernels._rust import Digest, DigestAlgorithm
d = Digest.hash_variant(DigestAlgorithm.SHA512, sys.argv[1])
print(json.dumps({"algorithm": str(d.algorithm).lower(), "files": d.files}))
"""


def sha512_digest(tmp):
    """{"algorithm": "sha512", "files": ...} over torch-universal's package, from kernels itself."""
    folder = tmp / "sha512-variant"
    folder.mkdir()
    (folder / "__init__.py").write_text(package("torch-universal (sha512)"))
    p = support.run_python(SHA512_DIGEST, support.kernels_env(tmp), str(folder), timeout=TIMEOUT)
    digest = support.last_json(p.stdout)
    if p.returncode != 0 or not digest or digest.get("algorithm") != "sha512":
        raise RuntimeError(f"kernels computes no SHA-512 digest: {support.tail(p)}")
    return digest


def hub_spec(tmp, digest):
    def repo(repo_id, files, extra):
        return {"repo_id": repo_id, "type": "kernel",
                "commits": [{"message": "v1", "branches": ["v1", "main"], "metadata": True,
                             "metadata_extra": {"version": 1, "python-depends": [], **extra}, "files": files}]}
    return {"organizations": {ORG: {"trusted_kernel_publisher": True}},
            "repos": [repo(SDK, {f"build/{v}/__init__.py": {"text": package(v)} for v in ("sdk", "sdk-cpu", "sdk-cuda")},
                           {}),
                      repo(DOTTED, dotted_files(), {}),
                      repo(ZIPPED, zipped_files(tmp), {"id": ZIP_ID, "build-layout": "zip"}),
                      repo(SHA512, {"build/torch-universal/__init__.py": {"text": package("torch-universal (sha512)")}},
                           {"digest": digest}),
                      repo(SHA512_CHANGED, {"build/torch-universal/__init__.py": {"text": package("changed")}},
                           {"digest": digest})]}


# The facts kernels 0.19.1 selects with on this host, as --host spells them.
FACTS = """
import json, sys, sysconfig
from kernels._internals import backends, compat
b = backends._backend()
facts = {"cpu": __import__("platform").machine(), "os": "linux"}
if b.name in ("cuda", "rocm", "xpu", "cann"):
    facts[b.name] = f"{b.version.major}.{b.version.minor}"
elif b.name != "cpu":
    facts[b.name] = "true"
if compat.has_tvm_ffi:
    import tvm_ffi
    v = tvm_ffi.__version__.split(".")
    facts["tvm-ffi"] = f"{v[0]}.{v[1]}"
facts["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
facts["free-threaded"] = "true" if sysconfig.get_config_var("Py_GIL_DISABLED") else "false"
facts["mlx"] = "true" if compat.has_mlx else "false"
print(json.dumps(facts))
"""

LOAD = """
import json, sys
import kernels
module = kernels.get_kernel(sys.argv[1], version=1)
print(json.dumps({"file": module.__file__, "variant": module.VARIANT,
                  "sum": module.vector_add([1, 2, 3], [10, 20, 30])}))
"""


def check_repo(report, args, tmp, server, repo, host_spec, cache):
    """kernels' choice = kernhub's; kernhub prewarms it from kernels.lock."""
    p, decisions, accepted = support.kernels_decisions(tmp, server.endpoint, repo, 1, timeout=TIMEOUT)
    if not report.check(p.returncode == 0 and accepted, f"kernels 0.19.1 selects a variant of {repo}", support.tail(p)):
        return None
    want = accepted[0]
    p, preferred = support.kernels_variants_cli(tmp, server.endpoint, repo, 1, timeout=TIMEOUT)
    report.check(preferred == want, f"`kernels variants --json` prefers the variant kernels selects for {repo}",
                 f"preferred {preferred}, want {want}; {support.tail(p)}")
    info = support.kernhub(args.kernhub, ["info", repo + "@v1", "--host", host_spec, "--json", "--endpoint",
                                          server.endpoint, "--cache-dir", str(tmp / "info-cache")],
                           support.clean_env(KERNHUB_TORCH_DIR=str(tmp / "no-torch")), timeout=TIMEOUT)
    got = json.loads(info.stdout).get("selected") if info.returncode == 0 else info.stderr.strip()
    report.equal(got, want, f"kernhub info --host (kernels' facts) selects what kernels selects for {repo}")
    project = repo.split("/")[1]
    p, lock = support.kernels_lock(tmp, project, repo, server.endpoint, timeout=TIMEOUT)
    if not report.check(lock is not None, f"`kernels lock` writes {project}/kernels.lock", support.tail(p)):
        return None
    pre = support.kernhub(args.kernhub, ["prewarm", "--lock", str(lock), "--target", want, "--cache-dir", str(cache),
                                         "--endpoint", server.endpoint, "--json"],
                          support.child_env(tmp, HF_HUB_DISABLE_TELEMETRY=1), timeout=TIMEOUT)
    report.check(pre.returncode == 0, f"kernhub prewarm --lock --target {want} fills the cache for {repo}",
                 support.tail(pre))
    return want


def check_sdk_load(report, args, tmp, server):
    """An SDK variant is fetched as any variant, and its load is exit 7 saying why."""
    common = ["--endpoint", server.endpoint, "--cache-dir", str(tmp / "sdk-cache"), "--json"]
    env = support.clean_env(KERNHUB_BACKEND="cpu")
    fetch = support.kernhub(args.kernhub, ["fetch", SDK + "@v1", *common], env, timeout=TIMEOUT)
    fetched = json.loads(fetch.stdout) if fetch.returncode == 0 else {}
    report.check(fetched.get("variant") == "sdk-cpu", "kernhub fetch selects and fetches the SDK variant "
                 "for the CPU backend", support.tail(fetch))
    report.check(fetched.get("python_depends") == [] and fetched.get("provenance") is None,
                 "fetch --json shows the metadata's python-depends (and no provenance, which it lacks)",
                 str({k: fetched.get(k) for k in ("python_depends", "provenance")}))
    info = support.kernhub(args.kernhub, ["info", SDK + "@v1", *common], env, timeout=TIMEOUT)
    variants = {v["name"]: v for v in (json.loads(info.stdout)["variants"] if info.returncode == 0 else [])}
    report.check("SDK" in variants.get("sdk-cpu", {}).get("load_refusal", ""),
                 "kernhub info --json gives the selected SDK variant's load_refusal", info.stdout[:300])
    load = support.kernhub(args.kernhub, ["load", SDK + "@v1", "--symbol", "vector_add", *common], env,
                           timeout=TIMEOUT)
    report.check(load.returncode == 7 and "SDK" in load.stdout + load.stderr,
                 "kernhub load of an SDK variant is exit 7 saying kernhub loads no SDK",
                 f"exit {load.returncode}: {support.tail(load)}")
    # kernhub's own lock selects the SDK variant, and prewarm (no --target) takes it.
    project = tmp / "sdk-project"
    project.mkdir()
    (project / "kernhub.json").write_text(json.dumps(
        {"format": 1, "kernels": {"sdk": {"repo_id": SDK, "version": 1, "symbol": "vector_add"}}}))
    where = ["--project", str(project), "--endpoint", server.endpoint]
    lock = support.kernhub(args.kernhub, ["lock", *where, "--cache-dir", str(tmp / "sdk-lock-cache")], env,
                           timeout=TIMEOUT)
    text = (project / "kernhub.lock").read_text() if lock.returncode == 0 else ""
    report.check('"sdk-cpu"' in text and '"sdk-cuda"' not in text,
                 "kernhub lock selects and pins the SDK variant for the CPU backend", support.tail(lock))
    pre = support.kernhub(args.kernhub, ["prewarm", *where, "--cache-dir", str(tmp / "sdk-prewarm")], env,
                          timeout=TIMEOUT)
    held = sorted(p.name for p in (tmp / "sdk-prewarm").glob("kernels--*--sdk/snapshots/*/build/*"))
    report.equal(held if pre.returncode == 0 else support.tail(pre), ["sdk-cpu"],
                 "kernhub prewarm from that lock holds the SDK variant and no other")


def check_sha512_changed(report, args, tmp, server):
    """A file that does not match the SHA-512 digest: kernels refuses it, and so does kernhub (exit 4)."""
    p = support.run_python(LOAD, support.kernels_env(tmp, HF_HUB_CACHE=tmp / "changed-py", HF_ENDPOINT=server.endpoint),
                           SHA512_CHANGED, timeout=TIMEOUT)
    report.check(p.returncode != 0 and "digest" in p.stderr.lower(),
                 "kernels 0.19.1 refuses the variant whose file does not match its SHA-512 digest", support.tail(p))
    fetch = support.kernhub(args.kernhub, ["fetch", SHA512_CHANGED + "@v1", "--endpoint", server.endpoint,
                                           "--cache-dir", str(tmp / "changed-kh")],
                            support.clean_env(), timeout=TIMEOUT)
    report.check(fetch.returncode == 4 and "does not match the digest" in fetch.stderr,
                 "kernhub fetch refuses it too (exit 4)", f"exit {fetch.returncode}: {support.tail(fetch)}")


def main():
    parser = support.argument_parser(__doc__.splitlines()[0])
    args = support.parse_args(parser)
    try:
        from kernels._internals.variants import _resolve_variant_for_system  # noqa: F401
    except ImportError as e:
        return support.skipped(f"this interpreter has no kernels 0.19 ({e})")
    report = support.Report()
    if support.inputs_missing(args, report):
        return report.finish()
    with tempfile.TemporaryDirectory(prefix="kernhub-layouts-") as name:
        tmp = Path(name)
        support.make_hub(args, hub_spec(tmp, sha512_digest(tmp)), tmp / "hub", timeout=TIMEOUT)
        server = support.HubServer(args.python, args.hub_server, tmp / "hub")
        facts_run = support.run_python(FACTS, support.kernels_env(tmp), timeout=TIMEOUT)
        facts = support.last_json(facts_run.stdout) or {}
        if not report.check(facts_run.returncode == 0 and facts, "kernels says which facts it selects with",
                            support.tail(facts_run)):
            server.close()
            return report.finish()
        host_spec = ",".join(f"{k}={v}" for k, v in facts.items())
        report.info(f"kernels' host facts: {host_spec}")
        cache = tmp / "image-cache"
        chosen = {repo: check_repo(report, args, tmp, server, repo, host_spec, cache) for repo in (DOTTED, ZIPPED, SDK, SHA512)}
        check_sdk_load(report, args, tmp, server)
        check_sha512_changed(report, args, tmp, server)
        server.close()  # from here on, nothing can be downloaded
        for repo, variant in chosen.items():
            if variant is None:
                continue
            env = support.kernels_env(tmp, HF_HUB_OFFLINE=1, HF_HUB_CACHE=cache)
            p = support.run_python(LOAD, env, repo, timeout=TIMEOUT)
            out = support.last_json(p.stdout) or {}
            where = str(cache / ("kernels--" + repo.replace("/", "--")))
            report.check(p.returncode == 0 and out.get("sum") == [11, 22, 33]
                         and str(out.get("file", "")).startswith(where)
                         and (repo != ZIPPED or f"{ZIP_ID}.zip" in out.get("file", "")),
                         f"kernels 0.19.1 loads {variant} of {repo} offline from the kernhub-prewarmed cache",
                         f"{out}; {support.tail(p)}")
        receipts = cache / ".verified-kernels"
        report.info(f"kernels wrote receipts: {sorted(str(p.relative_to(cache)) for p in receipts.rglob('*'))[:6]}"
                    if receipts.exists() else "kernels wrote no receipts")
        verify = support.kernhub(args.kernhub, ["cache", "verify", "--cache-dir", str(cache), "--json"],
                                 support.clean_env(), timeout=TIMEOUT)
        report.check(verify.returncode == 0, "kernhub cache verify reads offline the cache kernels used, receipts "
                     "and all, and reports no damage", support.tail(verify))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
