#!/usr/bin/env python3
"""Interop: the real Python huggingface_hub reads a cache that kernhub filled.

Lays out a small hub with examples/hub/make_hub.py (a *model* repo and a
*kernel* repo, each with build/<native-cpu variant>/ holding a real .so, a
generated metadata.json and a nested text file), serves it with
tests/support/hub_server.py, fills cache A with `kernhub fetch`, then checks
with huggingface_hub in child processes (so HF_HUB_OFFLINE, HF_HUB_CACHE and
HF_ENDPOINT are read at import time, as in real use):

  (a) offline hf_hub_download / try_to_load_from_cache / snapshot_download of
      the model repo find kernhub's snapshot files, by branch and by commit,
      and make no request to the hub;
  (b) scan_cache_dir lists the repos with no warnings, the right repo_type,
      commit, refs {"main"}, nb_files and size_on_disk;
  (c) the kernel repo: the same when this huggingface_hub knows repo_type
      "kernel", else scan_cache_dir must not crash (its warning is printed);
  (d) huggingface_hub downloads the same files from the hub into cache B;
      blobs/<etag>, the snapshot symlink targets and refs/main must be
      byte-for-byte what kernhub wrote;
  (d2) huggingface_hub online over kernhub's cache reuses its files, and
      force_download replaces a read-only kernhub blob;
  (e) huggingface_hub can delete kernhub's revisions (hf cache delete).

Prints one PASS/FAIL line per check (INFO/DIFF lines are facts that do not
fail the test), then "N passed, N failed". Exit 0 when all pass, 1 when any
check fails, 77 (before any check, printing "SKIPPED: <reason>") when
huggingface_hub is not installed, or with --repo-type kernel when it has no
repo_type "kernel". --repo-type limits the run to the model or the kernel
repo; ctest runs each as its own test.

Usage: test_hf_cache.py --kernhub CLI --so LIB.so --make-hub make_hub.py
                        --hub-server hub_server.py [--demo-hub DIR] [--python EXE]
                        [--repo-type model|kernel]
Each option also reads an environment variable: KERNHUB_CLI, KERNHUB_INTEROP_SO,
KERNHUB_MAKE_HUB, KERNHUB_HUB_SERVER, KERNHUB_DEMO_HUB, KERNHUB_PYTHON.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import interop_support as support
from interop_support import NAMES, SO_NAME, Report, clean_env, folder_name


def kernel_type_support():
    """Whether this huggingface_hub accepts repo_type="kernel" for downloads and scans."""
    from huggingface_hub import constants

    return {
        "REPO_TYPES": list(constants.REPO_TYPES),
        "REPO_TYPES_WITH_KERNEL": getattr(constants, "REPO_TYPES_WITH_KERNEL", None),
        "download": support.hf_has_kernel_repos(),
        "url_prefix": constants.REPO_TYPES_URL_PREFIXES.get("kernel"),
        "scan": scan_knows_kernels(),
    }


def scan_knows_kernels():
    """Whether scan_cache_dir accepts a "kernels--" folder: probed on a minimal
    hand-made one, since some versions (1.10-1.x) know repo_type "kernel" for
    downloads but scan against a fixed set of types."""
    from huggingface_hub import scan_cache_dir

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-probe-") as probe:
        (Path(probe) / "kernels--probe--probe" / "snapshots").mkdir(parents=True)
        return not scan_cache_dir(probe).warnings



# ---- child phases (run with the huggingface_hub environment set) -------------

def phase_offline(ctx, report):
    """(a), (b), (c) against the kernhub-filled cache, HF_HUB_OFFLINE=1."""
    import huggingface_hub
    from huggingface_hub import constants

    try:
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # before huggingface_hub 0.23
        from huggingface_hub.utils import LocalEntryNotFoundError

    cache = ctx["cache"]
    support = kernel_type_support()
    report.check(constants.HF_HUB_OFFLINE, "huggingface_hub sees HF_HUB_OFFLINE=1")
    report.equal(os.path.realpath(constants.HF_HUB_CACHE), os.path.realpath(cache),
                 "huggingface_hub resolves HF_HUB_CACHE to the kernhub cache")

    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            report.info(f"{label}: this huggingface_hub has no repo_type 'kernel' for downloads; skipping (a) for it")
            continue
        snapshot = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"])
        for f in repo["files"]:
            want_bytes = Path(f["source"]).read_bytes()
            for revision in ("main", repo["commit"]):
                what = f"(a) {label}: hf_hub_download({f['path']!r}, revision={revision[:12]!r}, local_files_only)"
                try:
                    got = huggingface_hub.hf_hub_download(
                        repo["repo_id"], filename=f["path"], repo_type=repo["type"], revision=revision,
                        cache_dir=cache, local_files_only=True)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    report.check(False, what, f"{type(e).__name__}: {e}")
                    continue
                want_path = os.path.join(snapshot, f["path"])
                report.check(got == want_path and Path(got).read_bytes() == want_bytes,
                             what + " returns the snapshot path with the original bytes",
                             f"returned {got!r} (want {want_path!r}), bytes equal: "
                             f"{os.path.exists(got) and Path(got).read_bytes() == want_bytes}")
        so = next(f for f in repo["files"] if f["path"].endswith(SO_NAME))
        got = huggingface_hub.try_to_load_from_cache(repo["repo_id"], so["path"], revision="main",
                                                     repo_type=repo["type"])
        report.equal(got, os.path.join(snapshot, so["path"]),
                     f"(a) {label}: try_to_load_from_cache (cache from HF_HUB_CACHE) finds the .so")
        try:
            got = huggingface_hub.snapshot_download(
                repo["repo_id"], repo_type=repo["type"], revision="main", local_files_only=True,
                allow_patterns=[f"build/{ctx['variant']}/*"])
            report.equal(os.path.realpath(got), os.path.realpath(snapshot),
                         f"(a) {label}: snapshot_download(local_files_only) returns kernhub's snapshot")
        except Exception as e:  # noqa: BLE001
            report.check(False, f"(a) {label}: snapshot_download(local_files_only)", f"{type(e).__name__}: {e}")
        # A file kernhub did not fetch must be reported missing: proves the
        # answers above came from the cache, not from anywhere else.
        try:
            huggingface_hub.hf_hub_download(repo["repo_id"], filename="README.md", repo_type=repo["type"],
                                            revision="main", cache_dir=cache, local_files_only=True)
            report.check(False, f"(a) {label}: a file kernhub did not fetch is missing offline", "README.md was found")
        except LocalEntryNotFoundError:
            report.check(True, f"(a) {label}: a file kernhub did not fetch is missing offline (LocalEntryNotFoundError)")

    # (b) and (c): scan_cache_dir.
    try:
        info = huggingface_hub.scan_cache_dir(cache)
    except Exception as e:  # noqa: BLE001
        report.check(False, "(b) scan_cache_dir(kernhub cache) does not raise", f"{type(e).__name__}: {e}")
        return
    report.check(True, "(b) scan_cache_dir(kernhub cache) does not raise")
    for w in info.warnings:
        report.info(f"scan_cache_dir warning: {w}")
    kernel_warnings = [w for w in info.warnings if "kernels--" in str(w)]
    other_warnings = [w for w in info.warnings if "kernels--" not in str(w)]
    if support["scan"]:
        report.equal([str(w) for w in info.warnings], [], "(b) scan_cache_dir reports no warnings")
    else:
        report.equal([str(w) for w in other_warnings], [], "(b) scan_cache_dir reports no warnings but for kernels--")
        report.info(f"(c) this huggingface_hub does not know 'kernels--' folders; its warnings: "
                    f"{[str(w) for w in kernel_warnings]}")
    incomplete = getattr(info, "incomplete_files", frozenset())
    report.equal(sorted(str(f.file_path) for f in incomplete), [], "(b) scan_cache_dir finds no incomplete files")
    by_id = {(r.repo_type, r.repo_id): r for r in info.repos}
    total = 0
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        step = "(c)" if repo["type"] == "kernel" else "(b)"
        if repo["type"] == "kernel" and not support["scan"]:
            report.check(("kernel", repo["repo_id"]) not in by_id,
                         f"{step} {label}: left out of scan_cache_dir's repos (no 'kernels' repo type here)")
            continue
        cached = by_id.get((repo["type"], repo["repo_id"]))
        if not report.check(cached is not None, f"{step} {label}: listed with repo_type {repo['type']!r}",
                            f"listed: {sorted(by_id)}"):
            continue
        folder = Path(os.path.realpath(cache)) / folder_name(repo)
        report.equal(cached.repo_path, folder, f"{step} {label}: repo_path is {folder.name}")
        revs = sorted(cached.revisions, key=lambda r: r.commit_hash)
        report.equal([r.commit_hash for r in revs], [repo["commit"]], f"{step} {label}: one revision, the fetched commit")
        if not revs:
            continue
        rev = revs[0]
        report.equal(set(rev.refs), {"main"}, f"{step} {label}: the revision's refs are {{'main'}}")
        want_files = {f["path"]: f for f in repo["files"]}
        got_files = {f.file_path.relative_to(rev.snapshot_path).as_posix(): f for f in rev.files}
        report.equal(sorted(got_files), sorted(want_files), f"{step} {label}: the revision lists the variant's files")
        blob_dir = folder / "blobs"
        wrong = [p for p, f in got_files.items() if p in want_files and
                 (f.blob_path != blob_dir / want_files[p]["etag"] or f.size_on_disk != want_files[p]["size"])]
        report.equal(wrong, [], f"{step} {label}: each file's blob_path is blobs/<etag> with the file's size")
        etags = {f["etag"]: f["size"] for f in repo["files"]}
        report.equal(cached.nb_files, len(etags), f"{step} {label}: nb_files counts the distinct blobs")
        report.equal(cached.size_on_disk, sum(etags.values()), f"{step} {label}: size_on_disk is the blobs' total")
        report.equal(rev.size_on_disk, sum(etags.values()), f"{step} {label}: the revision's size_on_disk")
        total += cached.size_on_disk
    if support["scan"]:
        report.equal(info.size_on_disk, total, "(b) the cache's size_on_disk is the repos' total")


def phase_download(ctx, report):
    """(d): huggingface_hub itself downloads the same files from the hub into a fresh cache."""
    import huggingface_hub

    cache = ctx["cache"]
    support = kernel_type_support()
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            report.info(f"{label}: no repo_type 'kernel' in this huggingface_hub; not downloading it")
            continue
        snapshot = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"])
        for f in repo["files"]:
            what = f"(d) {label}: hf_hub_download({f['path']!r}, revision='main') from the test hub"
            try:
                got = huggingface_hub.hf_hub_download(repo["repo_id"], filename=f["path"], repo_type=repo["type"],
                                                      revision="main", cache_dir=cache)
            except Exception as e:  # noqa: BLE001
                report.check(False, what, f"{type(e).__name__}: {e}")
                continue
            want = os.path.join(snapshot, f["path"])
            report.check(got == want and Path(got).read_bytes() == Path(f["source"]).read_bytes(), what,
                         f"returned {got!r}, want {want!r}")


def phase_refresh(ctx, report):
    """(d2): huggingface_hub online over a kernhub-filled cache: a plain call reuses
    kernhub's files; force_download replaces a read-only kernhub blob under
    kernhub's lock file."""
    import huggingface_hub

    cache = ctx["cache"]
    support = kernel_type_support()
    for repo in ctx["repos"]:
        label = f"{repo['type']} repo {repo['repo_id']}"
        if repo["type"] == "kernel" and not support["download"]:
            continue
        so = next(f for f in repo["files"] if f["path"].endswith(SO_NAME))
        want = os.path.join(cache, folder_name(repo), "snapshots", repo["commit"], so["path"])
        for force in (False, True):
            what = f"(d2) {label}: online hf_hub_download(.so, force_download={force}) over kernhub's cache"
            try:
                got = huggingface_hub.hf_hub_download(repo["repo_id"], filename=so["path"], repo_type=repo["type"],
                                                      revision="main", cache_dir=cache, force_download=force)
            except Exception as e:  # noqa: BLE001
                report.check(False, what, f"{type(e).__name__}: {e}")
                continue
            report.check(got == want and Path(got).read_bytes() == Path(so["source"]).read_bytes(), what,
                         f"returned {got!r}, want {want!r}")


def phase_delete(ctx, report):
    """(e): huggingface_hub deletes kernhub's revisions (what `hf cache delete` does)."""
    import huggingface_hub

    cache = ctx["cache"]
    info = huggingface_hub.scan_cache_dir(cache)
    wanted = {(r["type"], r["repo_id"]): r["commit"] for r in ctx["repos"]}
    commits = [rev.commit_hash for repo in info.repos if (repo.repo_type, repo.repo_id) in wanted
               for rev in repo.revisions]
    if not report.check(bool(commits), "(e) scan_cache_dir finds kernhub revisions to delete"):
        return
    strategy = info.delete_revisions(*commits)
    report.info(f"delete_revisions would free {strategy.expected_freed_size} bytes")
    try:
        strategy.execute()
    except Exception as e:  # noqa: BLE001
        report.check(False, "(e) delete_revisions(...).execute() on the kernhub cache", f"{type(e).__name__}: {e}")
        return
    after = huggingface_hub.scan_cache_dir(cache)
    left = [(r.repo_type, r.repo_id) for r in after.repos if (r.repo_type, r.repo_id) in wanted]
    report.equal(left, [], "(e) delete_revisions(...).execute() removes kernhub's repos")
    known = [r for r in ctx["repos"] if r["type"] != "kernel" or kernel_type_support()["scan"]]
    leftovers = sorted(str(p.relative_to(cache)) for r in known for p in Path(cache).glob(f"{folder_name(r)}/blobs/*"))
    report.equal(leftovers, [], "(e) no blob of a deleted repo is left behind")


PHASES = {"offline": phase_offline, "download": phase_download, "refresh": phase_refresh, "delete": phase_delete}


def run_phase(name, ctx_path):
    return support.run_phase(name, PHASES[name], ctx_path)


# ---- parent: hub, kernhub, comparisons ---------------------------------------

def main_check(args):
    # The skip comes before any check: a skipped run checked nothing.
    why = support.hf_missing(need_kernel=False)
    if why:
        return support.skipped(why)
    import huggingface_hub

    report = Report()
    kinds = kernel_type_support()
    report.info(f"huggingface_hub {huggingface_hub.__version__} at {os.path.dirname(huggingface_hub.__file__)}")
    report.info(f"constants.REPO_TYPES = {kinds['REPO_TYPES']}; REPO_TYPES_WITH_KERNEL = "
                f"{kinds['REPO_TYPES_WITH_KERNEL']}; kernel URL prefix {kinds['url_prefix']!r}; "
                f"scan_cache_dir accepts kernels-- folders: {kinds['scan']}")
    report.info(f"repo_type 'kernel' supported for downloads: {kinds['download']}")
    if args.repo_type == "kernel" and not kinds["download"]:
        return support.skipped(f"huggingface_hub {huggingface_hub.__version__} has no repo_type 'kernel' for "
                               "downloads, so it cannot read a kernel repo from the cache")

    variant = support.host_variant()
    if support.inputs_missing(args, report):
        return 1
    if args.demo_hub and os.path.isfile(os.path.join(args.demo_hub, "_hub.json")):
        report.info(f"demo hub {args.demo_hub} present (this test lays out its own hub with a model repo)")

    with tempfile.TemporaryDirectory(prefix="kernhub-interop-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        kern_cache, hf_cache = workdir / "cache-kernhub", workdir / "cache-hf"
        hub = support.lay_out_vector_add_hub(args, report, workdir, variant, args.repo_type)
        if hub is None:
            return 1
        hub_dir, repos, registry = hub

        server = support.HubServer(args.python, args.hub_server, hub_dir)
        try:
            report.info(f"hub at {server.endpoint}, LFS CDN at {server.cdn}")
            fetched = [r for r in repos
                       if support.kernhub_fetch(args, report, NAMES[r["repo_id"]], r, kern_cache, server, registry,
                                                variant, workdir)]
            if len(fetched) != len(repos):
                return 1

            hf_home = workdir / "hf-home"
            server.control("/_reset", b"{}")
            offline_env = clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_CACHE=kern_cache, HF_HUB_OFFLINE=1,
                                    HF_ENDPOINT=server.endpoint)
            run_child(report, "offline", {"cache": str(kern_cache), "repos": repos, "variant": variant},
                      workdir, offline_env)
            made = server.requests_since_reset()
            report.equal(made, [], "(a) huggingface_hub made no request with HF_HUB_OFFLINE=1")

            server.control("/_reset", b"{}")
            online_env = clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_CACHE=hf_cache, HF_ENDPOINT=server.endpoint)
            run_child(report, "download", {"cache": str(hf_cache), "repos": repos, "variant": variant},
                      workdir, online_env)
            for line in server.requests_since_reset():
                report.info(f"huggingface_hub request: {line}")

            refresh_cache = workdir / "cache-refresh"
            shutil.copytree(kern_cache, refresh_cache, symlinks=True)
            server.control("/_reset", b"{}")
            run_child(report, "refresh", {"cache": str(refresh_cache), "repos": repos, "variant": variant},
                      workdir, clean_env(HOME=workdir, HF_HOME=hf_home, HF_ENDPOINT=server.endpoint))
            for line in server.requests_since_reset():
                report.info(f"huggingface_hub request over kernhub's cache: {line}")
            for repo in repos:
                if repo["type"] == "kernel" and not kinds["download"]:
                    continue
                support.compare_layouts(report, repo, kern_cache, hf_cache)
            tags = [c / "CACHEDIR.TAG" for c in (kern_cache, hf_cache)]
            first_lines = [t.read_text().splitlines()[0] if t.is_file() else None for t in tags]
            report.info(f"CACHEDIR.TAG first line: kernhub {first_lines[0]!r}, huggingface_hub {first_lines[1]!r}")

            # The other direction: kernhub offline over the cache huggingface_hub
            # filled (no .kernhub/ side data there) rebuilds the listing from
            # the snapshot links and re-verifies every blob against its name.
            for repo in repos:
                if repo["type"] == "kernel" and not kinds["download"]:
                    continue
                cmd = [args.kernhub, "fetch", NAMES[repo["repo_id"]], "--registry", str(registry), "--offline",
                       "--cache-dir", str(hf_cache), "--target", variant, "--json", "--quiet"]
                p = support.run(cmd, clean_env(HOME=workdir, HF_HOME=hf_home), "kernhub fetch --offline", report)
                label = f"(d) kernhub fetch --offline {NAMES[repo['repo_id']]} over huggingface_hub's cache"
                if p is None or p.returncode != 0:
                    report.check(False, label, p.stderr.strip()[:300] if p is not None else "did not run")
                    continue
                out = json.loads(p.stdout)
                report.check(out["requests"] == 0 and out["bytes_downloaded"] == 0 and out["variant"] == variant,
                             f"{label}: exit 0, no request, variant {variant}", json.dumps(out)[:300])
        finally:
            server.close()

        delete_cache = workdir / "cache-delete"
        shutil.copytree(kern_cache, delete_cache, symlinks=True)
        run_child(report, "delete", {"cache": str(delete_cache), "repos": repos, "variant": variant},
                  workdir, clean_env(HOME=workdir, HF_HOME=hf_home, HF_HUB_OFFLINE=1))

    return report.finish()


def run_child(report, phase, ctx, workdir, env):
    support.run_child(report, __file__, phase, ctx, workdir, env)


def main():
    parser = support.argument_parser(__doc__.split("\n\n")[0], required=False, env_defaults=True)
    parser.add_argument("--demo-hub", default=os.environ.get("KERNHUB_DEMO_HUB"),
                        help="the demo hub tree (informational)")
    parser.add_argument("--repo-type", choices=("model", "kernel"),
                        help="check only the model or only the kernel repo (default: both)")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--context", help=argparse.SUPPRESS)
    args = support.parse_args(parser)
    if args.phase:
        return run_phase(args.phase, args.context)
    return main_check(args)


if __name__ == "__main__":
    sys.exit(main())
