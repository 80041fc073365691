#!/usr/bin/env python3
"""Interop: kernhub uses a cache that the real huggingface_hub filled.

Lays out a hub with examples/hub/make_hub.py (one kernel repo: the host's
native-cpu variant with a .so, a nested header and metadata.json, plus a
cu128 variant and a README), serves it with tests/support/hub_server.py, and
lets huggingface_hub's snapshot_download fetch the host variant into a
cache, exactly as the Python `kernels` library does. Then, on copies of that
cache:

  (1) kernhub fetch --offline finds the variant, makes no request, leaves
      huggingface_hub's trees/<commit>.json as it was, and huggingface_hub
      still reads the cache offline afterwards;
  (2) a file the variant has but the cache lacks: exit 6 naming it, using
      trees/<commit>.json as the commit's listing;
  (3) without trees/<commit>.json a missing file the metadata.json digest
      names is still exit 6, and a complete variant is returned but not
      recorded as complete;
  (4) a variant the repo has but the cache lacks (--target) is exit 6;
  (5) a read-only cache works offline (run as an unprivileged user when this
      test runs as root, since root ignores permission bits);
  (6) online, a blob huggingface_hub wrote that no longer matches its hash
      is downloaded again instead of being used.

Options, output and exit status as interop_support.py describes; skipped
(77) when huggingface_hub is missing or lacks repo_type "kernel".
"""

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import interop_support as support
from interop_support import clean_env, kernhub, run_python

REPO = "kernhub-interop/offline"
FOLDER = "kernels--kernhub-interop--offline"
HEADER = "include/vector_add.h"


def snapshot(cache, commit):
    return cache / FOLDER / "snapshots" / commit


def remove_file(cache, commit, relpath):
    """Removes a file and its blob, as if huggingface_hub never downloaded it."""
    link = snapshot(cache, commit) / relpath
    blob = link.resolve()
    link.unlink()
    blob.unlink()


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def main():
    args = support.parse_args(support.argument_parser())
    why = support.hf_missing()
    if why:
        return support.skipped(why)

    report = support.Report()
    variant = support.host_variant()
    with tempfile.TemporaryDirectory(prefix="kernhub-hf-offline-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o755)  # (5) runs kernhub as another user
        spec = {"repos": [{"repo_id": REPO, "type": "kernel", "commits": [{
            "message": "build", "branches": ["main"], "metadata": True, "files": {
                "README.md": {"text": "offline interop\n"},
                f"build/{variant}/libvector_add.so": {"path": str(Path(args.so).resolve()), "lfs": True},
                f"build/{variant}/{HEADER}": {"text": "#pragma once\n"},
                "build/native-cu128-x86_64-linux/libvector_add.so": {"text": "not cuda", "lfs": True},
            }}]}]}
        with support.served_hub(args, spec, tmp / "hub") as (server, index):
            run_checks(report, args, tmp, server.endpoint, index["repos"][REPO]["branches"]["main"], variant)
        # Let an unprivileged run's leftovers (none expected) not block cleanup.
        for root, dirs, files in os.walk(tmp):
            for name in dirs + files:
                path = os.path.join(root, name)
                if not os.path.islink(path):
                    os.chmod(path, stat.S_IRWXU | os.stat(path).st_mode)
    return report.finish()


def readable_cli(cli, folder):
    """A copy of the CLI, with the default registry where it looks for it
    (../share/kernhub/registry.json), in a folder any user can read: the build
    tree may lie under a private (0700) folder, as a home directory often is,
    which the unprivileged user of (5) cannot enter."""
    cli = Path(cli).resolve()
    (folder / "bin").mkdir(parents=True)
    (folder / "share" / "kernhub").mkdir(parents=True)
    shutil.copy2(cli, folder / "bin" / "kernhub")
    shutil.copy2(cli.parent / "share" / "kernhub" / "registry.json", folder / "share" / "kernhub" / "registry.json")
    for path in (folder, folder / "bin", folder / "share", folder / "share" / "kernhub"):
        os.chmod(path, 0o755)
    os.chmod(folder / "bin" / "kernhub", 0o755)
    os.chmod(folder / "share" / "kernhub" / "registry.json", 0o644)
    return str(folder / "bin" / "kernhub")


def run_checks(report, args, tmp, endpoint, commit, variant):
    filled = tmp / "hf-cache"
    download = (f"import huggingface_hub as h; print(h.snapshot_download({REPO!r}, repo_type='kernel', "
                f"allow_patterns=['build/{variant}/*']))")
    p = run_python(download, clean_env(HF_HUB_CACHE=filled, HF_ENDPOINT=endpoint, HF_HOME=tmp / "hf-home"))
    if not report.check(p.returncode == 0, "huggingface_hub snapshot_download fills a cache from the test hub",
                        p.stderr[-2000:]):
        return
    hf_tree = filled / FOLDER / "trees" / f"{commit}.json"
    if not report.check(hf_tree.is_file(), "huggingface_hub wrote trees/<commit>.json"):
        return
    tree_bytes = hf_tree.read_bytes()
    home = tmp / "kh-home"
    home.mkdir()
    offline_env = clean_env(HF_HOME=home, KERNHUB_OFFLINE=1)
    base = ["fetch", REPO, "--json", "--cache-dir"]

    def fresh_copy(name):
        dest = tmp / name
        shutil.copytree(filled, dest, symlinks=True)
        return dest

    # (1)
    cache = fresh_copy("c1")
    r = kernhub(args.kernhub, [*base, str(cache)], offline_env)
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    report.check(r.returncode == 0, "(1) kernhub fetch --offline on huggingface_hub's cache", r.stderr)
    report.check(sorted(f["path"] for f in out.get("files", [])) == [HEADER, "libvector_add.so", "metadata.json"],
                 "(1) all three files of the variant", str(out.get("files")))
    report.check(out.get("requests") == 0 and out.get("variant") == variant, "(1) no request, the host variant")
    report.check((cache / FOLDER / "trees" / f"{commit}.json").read_bytes() == tree_bytes and
                 tree(cache / FOLDER / "trees") == [f"{commit}.json"],
                 "(1) huggingface_hub's trees/ is left exactly as it was")
    report.check((cache / FOLDER / ".kernhub" / "variants" / commit / f"{variant}.json").is_file(),
                 "(1) the verified variant is recorded under .kernhub/")
    check_hf = (f"import huggingface_hub as h; print(h.snapshot_download({REPO!r}, repo_type='kernel', "
                f"allow_patterns=['build/{variant}/*'], local_files_only=True))")
    p = run_python(check_hf, clean_env(HF_HUB_CACHE=cache, HF_HUB_OFFLINE=1, HF_HOME=tmp / "hf-home"))
    report.check(p.returncode == 0 and p.stdout.strip() == str(snapshot(cache, commit)),
                 "(1) huggingface_hub still reads the cache offline after kernhub", p.stderr[-1000:])

    # (2)
    cache = fresh_copy("c2")
    remove_file(cache, commit, f"build/{variant}/{HEADER}")
    r = kernhub(args.kernhub, [*base, str(cache)], offline_env)
    report.check(r.returncode == 6 and HEADER in r.stderr,
                 "(2) a missing file is exit 6 naming it", f"exit {r.returncode}: {r.stderr}")
    report.check(not (cache / FOLDER / ".kernhub" / "variants").exists(), "(2) nothing is recorded")

    # (3)
    cache = fresh_copy("c3")
    (cache / FOLDER / "trees" / f"{commit}.json").unlink()
    remove_file(cache, commit, f"build/{variant}/{HEADER}")
    r = kernhub(args.kernhub, [*base, str(cache)], offline_env)
    report.check(r.returncode == 6 and HEADER in r.stderr,
                 "(3) without trees/<commit>.json, a file the digest names is missing: exit 6",
                 f"exit {r.returncode}: {r.stderr}")
    cache = fresh_copy("c3b")
    (cache / FOLDER / "trees" / f"{commit}.json").unlink()
    r = kernhub(args.kernhub, [*base, str(cache)], offline_env)
    report.check(r.returncode == 0, "(3) without trees/<commit>.json a complete variant is returned", r.stderr)
    report.check(not (cache / FOLDER / ".kernhub" / "variants").exists(),
                 "(3) but not recorded as complete: nothing lists the whole commit")
    report.check(not any((cache / FOLDER / "trees").iterdir()), "(3) kernhub does not write huggingface_hub's trees/")

    # (4)
    cache = fresh_copy("c4")
    r = kernhub(args.kernhub, [*base, str(cache), "--target", "native-cu128-x86_64-linux"], offline_env)
    report.check(r.returncode == 6 and "native-cu128-x86_64-linux" in r.stderr and "not" in r.stderr,
                 "(4) a variant the repo has but the cache lacks is exit 6", f"exit {r.returncode}: {r.stderr}")

    # (5)
    cache = fresh_copy("c5")
    for root, dirs, files in os.walk(cache):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode & ~0o222 | 0o555 if name in dirs else 0o444)
    os.chmod(cache, 0o555)
    user = 65534 if os.geteuid() == 0 else None
    cli, cwd = args.kernhub, None
    if user is not None:
        # Also run from that folder: the working folder is searched for a
        # project registry (kernhub.json), and ctest's may be unreadable too.
        cwd = tmp / "as-nobody"
        cli = readable_cli(args.kernhub, cwd)
    r = kernhub(cli, [*base, str(cache)], offline_env, user=user, cwd=cwd)
    report.check(r.returncode == 0 and len(json.loads(r.stdout or "{}").get("files", [])) == 3,
                 "(5) a read-only huggingface_hub cache works offline", f"exit {r.returncode}: {r.stderr}")

    # (6)
    cache = fresh_copy("c6")
    so = snapshot(cache, commit) / "build" / variant / "libvector_add.so"
    blob = so.resolve()
    data = bytearray(blob.read_bytes())
    data[200] ^= 0xFF
    os.chmod(blob, 0o644)
    blob.write_bytes(bytes(data))
    r = kernhub(args.kernhub, ["fetch", REPO, "--json", "--cache-dir", str(cache), "--endpoint", endpoint],
                clean_env(HF_HOME=home))
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    report.check(r.returncode == 0 and out.get("bytes_downloaded") == len(data),
                 "(6) online, a damaged blob huggingface_hub wrote is downloaded again",
                 f"exit {r.returncode}: {r.stderr} {out.get('bytes_downloaded')}")
    report.check(blob.read_bytes() == Path(args.so).read_bytes(), "(6) the blob holds the hub's bytes again")


if __name__ == "__main__":
    sys.exit(main())
