#!/usr/bin/env python3
"""Lay out a static hub tree from a JSON spec.

The tree answers the read-only part of the Hub HTTP protocol as plain files,
so any static web server (or a file:// endpoint) can serve it:

  _hub.json                                   index of repos, refs, commits and
                                              each commit's full recursive tree
  api/{kernels|models}/ORG/NAME/revision/REV  revision JSON (branch, tag, commit)
  api/{kernels|models}/ORG/NAME/refs          refs JSON
  api/{kernels|models}/ORG/NAME/tree/COMMIT/build
                                              recursive listing of build/
  api/organizations/ORG/overview              organisation JSON, with the
                                              trustedKernelPublisher flag
  [kernels/]ORG/NAME/resolve/COMMIT/PATH      file bytes

Only the build/ listing is a static file because a file `tree/COMMIT` and a
directory `tree/COMMIT/` cannot coexist; tests/support/hub_server.py answers
other listings from the trees recorded in _hub.json.

The spec lists repos, each a linear history of full tree snapshots, and
optionally organisations:

  {"organizations": {"ORG": {"trusted_kernel_publisher": bool}},
   "repos": [{"repo_id": "org/name", "type": "kernel"|"model", "private": false,
              "object_format": "sha1"|"sha256",
              "commits": [{"message": "...", "branches": ["main"], "tags": [],
                           "metadata": true, "metadata_extra": {...},
                           "files": {"PATH": {"text"|"path"|"base64": ..., "lfs": bool}}}]}]}

A ref named on a later commit moves there. "object_format" (default "sha1")
names how the repo's commit ids are made: "sha256" gives 64-hex ids, as a
git repository in SHA-256 object format has (file ids stay git blob SHA-1). "path" sources are relative to
the spec's directory. "lfs" defaults to true for .so, .fatbin, .cubin, .bin
and .tar.gz files and for files over 10 MiB. "metadata": true adds a kernels
style build/<variant>/metadata.json (digest of the variant's files, less
those a kernels build leaves out: metadata.json.sigstore, __pycache__/ and
*.pyc) where the commit lacks one; "metadata_extra" is merged over its top
level, e.g. to plant a wrong digest, or to add the "python-depends" list that
the Python kernels library (0.16 and later) needs to parse a metadata.json.
An organisation's overview is what the kernels library asks the hub before
it downloads or locks a kernel online: only a trusted kernel publisher's
repos pass its trust check (offline it skips the check).

Usage: make_hub.py --spec SPEC.json --out DIR   (Python 3.11 standard library)
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

LFS_SUFFIXES = (".so", ".fatbin", ".cubin", ".bin", ".tar.gz")
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
LFS_POINTER_SIZE = 134
REPO_ID_PART = re.compile(r"[A-Za-z0-9._-]+")
CHUNK = 1 << 20


class SpecError(Exception):
    """A problem with the spec; the message names the offending entry."""


@dataclass
class Blob:
    """One file's content, either in memory or in a source file on disk."""

    data: bytes | None = None
    source: Path | None = None
    size: int = 0
    git_oid: str = ""
    sha256: str = ""

    def chunks(self):
        if self.data is not None:
            yield self.data
            return
        with open(self.source, "rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk

    def compute_hashes(self):
        # Sizes are known up front, so the git blob header can be hashed
        # before the content and large files are streamed exactly once.
        self.size = len(self.data) if self.data is not None else self.source.stat().st_size
        sha1 = hashlib.sha1(b"blob %d\0" % self.size)
        sha256 = hashlib.sha256()
        for chunk in self.chunks():
            sha1.update(chunk)
            sha256.update(chunk)
        self.git_oid, self.sha256 = sha1.hexdigest(), sha256.hexdigest()

    def write_to(self, dest: Path):
        dest.parent.mkdir(parents=True, exist_ok=True)
        if self.data is not None:
            dest.write_bytes(self.data)
        else:
            shutil.copyfile(self.source, dest)


@dataclass
class RepoFile:
    blob: Blob
    lfs: bool


@dataclass
class Commit:
    sha: str
    files: dict[str, RepoFile]
    tree: list[dict]


@dataclass
class Repo:
    repo_id: str
    kind: str
    private: bool
    object_format: str = "sha1"
    commits: list[Commit] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def api_prefix(self) -> str:
        return f"api/{self.kind}s/{self.repo_id}"

    @property
    def resolve_prefix(self) -> str:
        return f"kernels/{self.repo_id}" if self.kind == "kernel" else self.repo_id


def dump_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def check_keys(obj, where: str, allowed: set[str]):
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: expected a JSON object")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def typed(obj: dict, key: str, kind, default, where: str):
    value = obj.get(key, default)
    if not isinstance(value, kind):
        raise SpecError(f"{where}: field {key!r} must be a {kind.__name__}")
    return value


def check_repo_id(repo_id: str, where: str):
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(
        REPO_ID_PART.fullmatch(p) and not p.startswith(".") and ".." not in p for p in parts
    ):
        raise SpecError(f"{where}: repo_id {repo_id!r} must be ORG/NAME of [A-Za-z0-9._-], no leading dot, no '..'")


def check_repo_path(path: str, where: str):
    parts = path.split("/")
    if "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise SpecError(f"{where}: {path!r} must be a relative POSIX path without empty, '.' or '..' segments")


def check_ref_name(name, where: str):
    # Names become single path segments in the static tree, and a 40- or
    # 64-hex name would be indistinguishable from a commit sha.
    if (not isinstance(name, str) or name in ("", ".", "..") or "/" in name
            or re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", name)):
        raise SpecError(f"{where}: ref name {name!r} must be a non-empty single path segment and not a commit sha")


def load_blob(path: str, entry, spec_dir: Path, where: str) -> RepoFile:
    check_keys(entry, where, {"text", "path", "base64", "lfs"})
    sources = [k for k in ("text", "path", "base64") if k in entry]
    if len(sources) != 1:
        raise SpecError(f"{where}: give exactly one of 'text', 'path' or 'base64'")
    kind = sources[0]
    value = typed(entry, kind, str, "", where)
    if kind == "text":
        blob = Blob(data=value.encode("utf-8"))
    elif kind == "base64":
        try:
            blob = Blob(data=base64.b64decode(value, validate=True))
        except ValueError as e:
            raise SpecError(f"{where}: invalid base64: {e}") from None
    else:
        source = spec_dir / value
        if not source.is_file():
            raise SpecError(f"{where}: source file {str(source)!r} does not exist")
        blob = Blob(source=source)
    blob.compute_hashes()
    default_lfs = path.endswith(LFS_SUFFIXES) or blob.size > LFS_SIZE_THRESHOLD
    return RepoFile(blob, typed(entry, "lfs", bool, default_lfs, where))


def backend_type(variant: str) -> str:
    for token in variant.split("-"):
        if token == "cuda" or re.fullmatch(r"cu\d+", token):
            return "cuda"
        if token in ("rocm", "metal", "xpu", "npu") or re.fullmatch(r"(rocm|xpu)\d+", token):
            return re.match(r"[a-z]+", token).group(0)
    return "cpu"


def excluded_from_digest(relpath: str) -> bool:
    """What a kernels build leaves out of its variant digest: the top-level
    metadata.json and its Sigstore bundle, __pycache__ folders and .pyc files."""
    return (relpath in ("metadata.json", "metadata.json.sigstore") or relpath.endswith(".pyc")
            or "__pycache__" in relpath.split("/"))


def add_metadata(repo_id: str, files: dict[str, RepoFile], extra: dict):
    """Generate build/<variant>/metadata.json for each variant lacking one."""
    variants = sorted({p.split("/")[1] for p in files if p.startswith("build/") and p.count("/") >= 2})
    for variant in variants:
        prefix = f"build/{variant}/"
        meta_path = prefix + "metadata.json"
        if meta_path in files:
            continue
        digests = {
            p[len(prefix):]: base64.b64encode(bytes.fromhex(f.blob.sha256)).decode("ascii")
            for p, f in sorted(files.items())
            if p.startswith(prefix) and not excluded_from_digest(p[len(prefix):])
        }
        metadata = {
            "name": repo_id.split("/")[1],
            "id": repo_id,
            "version": 1,
            "license": "Apache-2.0",
            "backend": {"type": backend_type(variant)},
            "digest": {"algorithm": "sha256", "files": digests},
        }
        metadata.update(extra)
        blob = Blob(data=dump_json(metadata))
        blob.compute_hashes()
        files[meta_path] = RepoFile(blob, lfs=False)


def build_tree(files: dict[str, RepoFile], where: str) -> list[dict]:
    """The full recursive listing of a commit, in the hub's tree format."""
    entries = []
    dirs: dict[str, list[str]] = {}
    for path, f in files.items():
        entry = {"type": "file", "oid": f.blob.git_oid, "size": f.blob.size, "path": path}
        if f.lfs:
            entry["lfs"] = {"oid": f.blob.sha256, "size": f.blob.size, "pointerSize": LFS_POINTER_SIZE}
        entries.append(entry)
        parts = path.split("/")
        for depth in range(1, len(parts)):
            dirs.setdefault("/".join(parts[:depth]), []).append(f"{path} {f.blob.git_oid}\n")
    for d, lines in dirs.items():
        if d in files:
            raise SpecError(f"{where}: {d!r} is both a file and a directory")
        oid = hashlib.sha1("".join(sorted(lines)).encode("utf-8")).hexdigest()
        entries.append({"type": "directory", "oid": oid, "size": 0, "path": d})
    return sorted(entries, key=lambda e: e["path"])


def load_commit(repo: Repo, raw, spec_dir: Path, where: str):
    check_keys(raw, where, {"message", "branches", "tags", "metadata", "metadata_extra", "files"})
    message = typed(raw, "message", str, "", where)
    raw_files = typed(raw, "files", dict, {}, where)
    extra = typed(raw, "metadata_extra", dict, {}, where)
    if extra and not raw.get("metadata"):
        raise SpecError(f"{where}: 'metadata_extra' needs \"metadata\": true")
    files = {}
    for path, entry in raw_files.items():
        check_repo_path(path, f"{where}.files")
        files[path] = load_blob(path, entry, spec_dir, f"{where}.files[{path!r}]")
    if typed(raw, "metadata", bool, False, where):
        add_metadata(repo.repo_id, files, extra)
    tree = build_tree(files, where)

    parent = repo.commits[-1].sha if repo.commits else ""
    pairs = sorted((p, f.blob.git_oid) for p, f in files.items())
    sha = hashlib.new(repo.object_format, dump_json([repo.repo_id, message, parent, pairs])).hexdigest()
    repo.commits.append(Commit(sha, files, tree))

    for kind, refs in (("branches", repo.branches), ("tags", repo.tags)):
        for name in typed(raw, kind, list, [], where):
            check_ref_name(name, f"{where}.{kind}")
            refs[name] = sha  # a later commit moves the ref
    both = set(repo.branches) & set(repo.tags)
    if both:
        raise SpecError(f"{where}: {sorted(both)[0]!r} is both a branch and a tag")


def load_organizations(raw) -> dict[str, dict]:
    """The overview documents of the spec's organisations, by name."""
    overviews = {}
    for name, entry in typed({"organizations": raw}, "organizations", dict, {}, "spec").items():
        where = f"organizations[{name!r}]"
        if not REPO_ID_PART.fullmatch(name) or name.startswith(".") or ".." in name:
            raise SpecError(f"{where}: name must be of [A-Za-z0-9._-], no leading dot, no '..'")
        check_keys(entry, where, {"trusted_kernel_publisher"})
        trusted = typed(entry, "trusted_kernel_publisher", bool, False, where)
        overviews[name] = {"name": name, "fullname": name, "avatarUrl": "", "type": "org",
                           "trustedKernelPublisher": trusted}
    return overviews


def load_spec(spec_path: Path) -> tuple[list[Repo], dict[str, dict]]:
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read spec {str(spec_path)!r}: {e}") from None
    check_keys(spec, "spec", {"repos", "organizations"})
    organizations = load_organizations(spec.get("organizations", {}))
    repos: dict[str, Repo] = {}
    for i, raw in enumerate(typed(spec, "repos", list, [], "spec")):
        where = f"repos[{i}]"
        check_keys(raw, where, {"repo_id", "type", "private", "object_format", "commits"})
        repo_id = typed(raw, "repo_id", str, "", where)
        check_repo_id(repo_id, where)
        if repo_id in repos:
            raise SpecError(f"{where}: repo {repo_id!r} appears twice")
        kind = typed(raw, "type", str, "kernel", where)
        if kind not in ("kernel", "model"):
            raise SpecError(f"{where}: type must be 'kernel' or 'model', not {kind!r}")
        object_format = typed(raw, "object_format", str, "sha1", where)
        if object_format not in ("sha1", "sha256"):
            raise SpecError(f"{where}: object_format must be 'sha1' or 'sha256', not {object_format!r}")
        repo = Repo(repo_id, kind, typed(raw, "private", bool, False, where), object_format)
        commits = typed(raw, "commits", list, [], where)
        if not commits:
            raise SpecError(f"{where}: a repo needs at least one commit")
        for j, raw_commit in enumerate(commits):
            load_commit(repo, raw_commit, spec_path.parent, f"{where}.commits[{j}]")
        repos[repo_id] = repo
    return list(repos.values()), organizations


def write_repo(repo: Repo, out: Path):
    api = out / repo.api_prefix
    api.mkdir(parents=True)
    refs = {
        "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": s} for n, s in repo.branches.items()],
        "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": s} for n, s in repo.tags.items()],
        "converts": [],
    }
    (api / "refs").write_bytes(dump_json(refs))

    by_sha = {c.sha: c for c in repo.commits}
    revisions = by_sha | {name: by_sha[sha] for name, sha in (repo.branches | repo.tags).items()}
    (api / "revision").mkdir()
    for rev, commit in revisions.items():
        doc = {
            "id": repo.repo_id,
            "sha": commit.sha,
            "private": repo.private,
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
        }
        (api / "revision" / rev).write_bytes(dump_json(doc))

    for commit in repo.commits:
        build = [e for e in commit.tree if e["path"].startswith("build/")]
        if build:
            listing = api / "tree" / commit.sha / "build"
            listing.parent.mkdir(parents=True)
            listing.write_bytes(dump_json(build))
        for path, f in commit.files.items():
            f.blob.write_to(out / repo.resolve_prefix / "resolve" / commit.sha / path)


def write_hub(repos: list[Repo], organizations: dict[str, dict], out: Path):
    """Build the tree next to OUT, then swap it in so readers never see half a hub."""
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    old = out.with_name(f"{out.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        for repo in repos:
            write_repo(repo, tmp)
        for name, overview in organizations.items():
            path = tmp / "api" / "organizations" / name / "overview"
            path.parent.mkdir(parents=True)
            path.write_bytes(dump_json(overview))
        index = {
            r.repo_id: {
                "type": r.kind,
                "private": r.private,
                "branches": r.branches,
                "tags": r.tags,
                "commits": [c.sha for c in r.commits],
                "trees": {c.sha: c.tree for c in r.commits},
            }
            for r in repos
        }
        (tmp / "_hub.json").write_bytes(dump_json({"repos": index}))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description="Lay out a static hub tree from a JSON spec.")
    parser.add_argument("--spec", required=True, type=Path, help="the spec JSON file")
    parser.add_argument("--out", required=True, type=Path, help="the hub directory to (re)create")
    args = parser.parse_args()
    try:
        write_hub(*load_spec(args.spec), args.out)
    except SpecError as e:
        print(f"make_hub.py: bad spec {str(args.spec)!r}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"make_hub.py: cannot write {str(args.out)!r}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
