"""A local stand-in for the Hugging Face Hub, so tests run the real `snapshot_download` offline.

`with LocalHub({"ORG/NAME": folder}) as hub:` serves folders as model repos on 127.0.0.1 and
answers what huggingface_hub 2.x asks, the way the Hub does: `GET /api/models/ORG/NAME/revision/REV`
(repo info: `sha`, `siblings`; skipped when REV is a commit), `GET /api/models/ORG/NAME/tree/REV`
(the listing: `oid`, `size`, `lfs`) and `HEAD`/`GET /ORG/NAME/resolve/REV/FILE`. A regular file
answers 200 with `ETag` (git blob sha1), `Content-Length` and `X-Repo-Commit`. An LFS file
(`.safetensors` and other suffixes of the Hub's default .gitattributes, or over 10 MiB) answers
302 with `X-Linked-Etag` (sha256), `X-Linked-Size` and a `Location` on another origin
(`http://localhost:PORT/cdn/SHA256`, standing for the Hub's CDN), so the client stops at the
redirect and downloads from there, as on the Hub.
Nothing says xet (`X-Xet-Hash`, `xetHash`), so files come over plain HTTP even with hf_xet.
Errors are 404s with the Hub's `X-Error-Code`: `RepoNotFound`, `RevisionNotFound`, `EntryNotFound`.

Revisions: "main", the repo's commit (`repo_commit(folder)`: a sha1 of its files, stable) and the
extra branch/tag names in `tags`. `hub.requests` lists every `(method, path)` received.
`fill_cache` writes a folder into a cache dir the way `snapshot_download` leaves it.

How this huggingface_hub reads its settings:

- `HF_HUB_OFFLINE` is read once, at import, into `huggingface_hub.constants.HF_HUB_OFFLINE`, which
  every request then checks. In-process: `monkeypatch.setattr(huggingface_hub.constants,
  "HF_HUB_OFFLINE", True)` (setting the environment variable after the import does nothing); in a
  subprocess: HF_HUB_OFFLINE=1 in its environment.
- `HF_ENDPOINT` is read at import too (`constants.ENDPOINT` and the file URL template), so pass
  `endpoint=hub.url` to `snapshot_download` instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

# Suffixes the Hub's default .gitattributes stores in LFS (a subset), and the size above which an
# upload goes to LFS anyway.
LFS_SUFFIXES = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".model"}
LFS_MIN_SIZE = 10 * 1024 * 1024


@dataclass(frozen=True)
class RepoFile:
    """One file of a repo, with the hashes the Hub derives from it (computed once)."""

    path: str  # relative, "/"-separated
    data: bytes

    @property
    def is_lfs(self) -> bool:
        return Path(self.path).suffix in LFS_SUFFIXES or len(self.data) > LFS_MIN_SIZE

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def pointer(self) -> bytes:
        """The git-lfs pointer file that git stores in place of an LFS file."""
        spec = "version https://git-lfs.github.com/spec/v1"
        return f"{spec}\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @cached_property
    def oid(self) -> str:
        """Git blob sha1 of what git stores: the content, or the pointer for an LFS file."""
        stored = self.pointer if self.is_lfs else self.data
        return hashlib.sha1(b"blob %d\0" % len(stored) + stored).hexdigest()

    def tree_entry(self) -> dict:
        """This file as the `/tree` endpoint lists it."""
        entry = {"type": "file", "oid": self.oid, "size": len(self.data), "path": self.path}
        if self.is_lfs:
            lfs = {"oid": self.sha256, "size": len(self.data), "pointerSize": len(self.pointer)}
            entry["lfs"] = lfs
        return entry


def read_repo(folder: Path) -> dict[str, RepoFile]:
    """All files under `folder`, by repo path, in sorted order."""
    paths = sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file())
    return {path: RepoFile(path, (Path(folder) / path).read_bytes()) for path in paths}


def _commit_of(files: Mapping[str, RepoFile]) -> str:
    listing = "".join(f"{path}\0{f.oid}\n" for path, f in files.items())
    return hashlib.sha1(listing.encode()).hexdigest()


def repo_commit(folder: Path) -> str:
    """The commit sha a repo made of `folder` has, here and in `fill_cache` (stable per content)."""
    return _commit_of(read_repo(folder))


class LocalHub:
    """Threaded HTTP server on 127.0.0.1 serving `repos` ("ORG/NAME" -> folder) like the Hub.

    A context manager (or `start()`/`stop()`); give `endpoint=hub.url` to huggingface_hub.
    """

    def __init__(
        self, repos: Mapping[str, Path], tags: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        self.files = {repo_id: read_repo(folder) for repo_id, folder in repos.items()}
        self.commits = {repo_id: _commit_of(files) for repo_id, files in self.files.items()}
        self.blobs = {f.sha256: f.data for files in self.files.values() for f in files.values()}
        self.refs = {repo_id: {"main", *(tags or {}).get(repo_id, ())} for repo_id in repos}
        self.requests: list[tuple[str, str]] = []  # (method, path without query), in order
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.hub = self  # type: ignore[attr-defined]
        port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        # Another origin (same socket) for LFS downloads, as the Hub redirects them to its CDN.
        self.cdn_url = f"http://localhost:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LocalHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def downloads(self) -> list[str]:
        """Paths of the file contents served so far (GETs of /resolve/ and of the CDN)."""
        return [p for m, p in self.requests if m == "GET" and ("/resolve/" in p or "/cdn/" in p)]


class _Handler(BaseHTTPRequestHandler):
    """Routes one request; `self.server.hub` is the `LocalHub`. HEAD answers GET's headers only."""

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_HEAD(self) -> None:
        self._route(with_body=False)

    def do_GET(self) -> None:
        self._route(with_body=True)

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.with_body:
            self.wfile.write(body)

    def _json(self, obj: object, status: int = 200, **headers: str) -> None:
        headers["Content-Type"] = "application/json"
        self._send(status, headers, json.dumps(obj).encode())

    def _error(self, code: str, message: str, **headers: str) -> None:
        headers |= {"X-Error-Code": code, "X-Error-Message": message}
        self._json({"error": message}, 404, **headers)

    def _route(self, with_body: bool) -> None:
        self.with_body = with_body
        self.hub: LocalHub = self.server.hub  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        self.hub.requests.append((self.command, url.path))
        # Split before unquoting: a revision such as refs%2Fpr%2F1 is one segment.
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            self._api("/".join(parts[2:4]), parts[4:], parse_qs(url.query))
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        elif len(parts) == 2 and parts[0] == "cdn" and parts[1] in self.hub.blobs:
            headers = {"ETag": f'"{parts[1]}"', "Content-Type": "application/octet-stream"}
            self._send(200, headers, self.hub.blobs[parts[1]])
        else:
            self._send(404, {"Content-Type": "text/plain"}, b"Not Found")

    def _commit(self, repo_id: str, revision: str) -> str | None:
        """The commit `revision` names in `repo_id`, or None after answering the Hub's 404."""
        if repo_id not in self.hub.files:
            return self._error("RepoNotFound", "Repository not found")
        commit = self.hub.commits[repo_id]
        if revision != commit and revision not in self.hub.refs[repo_id]:
            return self._error("RevisionNotFound", f"Invalid rev id: {revision}")
        return commit

    def _api(self, repo_id: str, rest: list[str], query: dict[str, list[str]]) -> None:
        """Repo info (`/api/models/ID[/revision/REV]`) or listing (`/api/models/ID/tree/REV`)."""
        revision = rest[1] if rest[:1] in (["revision"], ["tree"]) and len(rest) > 1 else "main"
        if not (commit := self._commit(repo_id, revision)):
            return
        files = self.hub.files[repo_id]
        if rest[:1] == ["tree"]:
            return self._tree(files, "/".join(rest[2:]), query.get("recursive") == ["true"])
        siblings = [{"rfilename": path} for path in files]
        self._json({"id": repo_id, "sha": commit, "siblings": siblings, "private": False})

    def _tree(self, files: dict[str, RepoFile], under: str, recursive: bool) -> None:
        """The `/tree` listing below `under`: files and the folders that hold them."""
        prefix = f"{under}/" if under else ""
        if under and not any(path.startswith(prefix) for path in files):
            return self._error("EntryNotFound", f"{under} does not exist")
        folders = {path.rsplit("/", n)[0] for path in files for n in range(1, path.count("/") + 1)}
        entries = [
            {"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
            for d in sorted(folders)
        ] + [file.tree_entry() for file in files.values()]
        entries = [e for e in entries if e["path"].startswith(prefix)]
        if not recursive:
            entries = [e for e in entries if "/" not in e["path"][len(prefix) :]]
        self._json(entries)

    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        """A file's content (regular) or a redirect to the CDN (LFS), with the Hub's headers."""
        if not (commit := self._commit(repo_id, revision)):
            return
        if (file := self.hub.files[repo_id].get(path)) is None:
            return self._error("EntryNotFound", "Entry not found", **{"X-Repo-Commit": commit})
        headers = {"X-Repo-Commit": commit, "ETag": f'"{file.oid}"'}
        if not file.is_lfs:
            headers["Content-Type"] = "application/octet-stream"
            return self._send(200, headers, file.data)
        headers |= {"X-Linked-Etag": f'"{file.sha256}"', "X-Linked-Size": str(len(file.data))}
        self._send(302, {**headers, "Location": f"{self.hub.cdn_url}/cdn/{file.sha256}"})


def fill_cache(cache_dir: Path, repo_id: str, folder: Path, revision_name: str = "main") -> str:
    """Lay `folder` out in `cache_dir` as `snapshot_download` would have; return the commit.

    Writes `models--ORG--NAME/blobs/<etag>`, `snapshots/<commit>/<file>` (relative symlinks to the
    blobs), `refs/<revision_name>` and the tree listing `trees/<commit>.json`, with which offline
    `snapshot_download` checks that the snapshot is complete (a newer format is just ignored).
    """
    files = read_repo(folder)
    commit = _commit_of(files)
    storage = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    for file in files.values():
        blob = storage / "blobs" / (file.sha256 if file.is_lfs else file.oid)  # = the ETag
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(file.data)
        link = storage / "snapshots" / commit / file.path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if revision_name != commit:
        (storage / "refs" / revision_name).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / revision_name).write_text(commit)
    tree = {}
    for path, file in files.items():
        tree[path] = {"size": len(file.data), "blob_id": file.oid}
        if file.is_lfs:
            tree[path] |= {"lfs_sha256": file.sha256, "lfs_size": len(file.data)}
    (storage / "trees").mkdir(parents=True, exist_ok=True)
    (storage / "trees" / f"{commit}.json").write_text(
        json.dumps({"format_version": 1, "files": tree}, indent=1)
    )
    return commit
