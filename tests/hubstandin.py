"""A local stand-in of the Hugging Face Hub serving folders as dataset repositories over HTTP.

Just enough of the Hub's HTTP API for `huggingface_hub.HfFileSystem` (repo info, recursive
tree listing, paths-info, file downloads by `resolve` URL) so that code reading a dataset
repository runs its real client path offline: point the client at it with
`HF_ENDPOINT=http://127.0.0.1:<port>` (and `HF_HUB_OFFLINE=0`).

    with serve_hub({"kenantang/Banana100": folder}) as endpoint:
        ...  # HF_ENDPOINT=endpoint

Every request is recorded in `requests` (method, path) for the tests to check what was fetched.
Hidden files (starting with a dot, e.g. a stand-in's own marker) are not served.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

SHA = "0" * 40  # the one commit every repository is at


def _entries(root: Path, under: str = "", recursive: bool = False) -> list[dict]:
    base = root / under if under else root
    if not base.is_dir():
        return []
    paths = base.rglob("*") if recursive else base.iterdir()
    out = []
    for p in sorted(paths):
        rel = p.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        out.append(_entry(root, rel))
    return out


def _entry(root: Path, rel: str) -> dict:
    p = root / rel
    if p.is_dir():
        return {"type": "directory", "path": rel, "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0}
    return {"type": "file", "path": rel, "size": p.stat().st_size,
            "oid": hashlib.sha1(p.read_bytes()).hexdigest()}


def _handler(repos: dict[str, Path], log: list):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json", headers=None):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, data, status: int = 200):
            self._send(status, json.dumps(data).encode(), headers={"X-Repo-Commit": SHA})

        def _not_found(self, what: str):
            self._send(404, json.dumps({"error": f"{what} not found"}).encode(),
                       headers={"X-Error-Code": "RepoNotFound" if "repo" in what else "EntryNotFound"})

        def _route(self):
            url = urlparse(self.path)
            parts = [unquote(p) for p in url.path.strip("/").split("/")]
            log.append((self.command, url.path))
            query = parse_qs(url.query)
            if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
                repo = "/".join(parts[2:4])
                if repo not in repos:
                    return self._not_found(f"repo {repo}")
                root, rest = repos[repo], parts[4:]
                if not rest or rest[0] == "revision":
                    siblings = [{"rfilename": e["path"]} for e in _entries(root, recursive=True) if e["type"] == "file"]
                    return self._json({"id": repo, "sha": SHA, "private": False, "siblings": siblings})
                if rest[0] == "tree":
                    under = "/".join(rest[2:])
                    if under and not (root / under).exists():
                        return self._not_found(f"path {under}")
                    recursive = query.get("recursive", ["false"])[0].lower() == "true"
                    return self._json(_entries(root, under, recursive))
                if rest[0] == "paths-info":
                    length = int(self.headers.get("Content-Length") or 0)
                    raw = self.rfile.read(length).decode() if length else ""
                    if self.headers.get("Content-Type", "").startswith("application/json"):
                        paths = json.loads(raw or "{}").get("paths", [])
                    else:
                        paths = parse_qs(raw).get("paths", [])
                    paths = [paths] if isinstance(paths, str) else paths
                    return self._json([_entry(root, p) for p in paths if p and (root / p).exists()])
            if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":  # .../resolve/<rev>/<path>
                repo = "/".join(parts[1:3])
                if repo not in repos:
                    return self._not_found(f"repo {repo}")
                path = repos[repo] / "/".join(parts[5:])
                if not path.is_file():
                    return self._not_found(f"file {path.name}")
                body = path.read_bytes()
                return self._send(200, body, "application/octet-stream",
                                  {"ETag": f'"{hashlib.sha1(body).hexdigest()}"', "X-Repo-Commit": SHA})
            return self._not_found(f"route {url.path}")

        do_GET = do_HEAD = do_POST = _route

    return Handler


@contextlib.contextmanager
def serve_hub(repos: dict[str, str | Path]):
    """Serve {repo_id: folder} on a free local port; yields the endpoint URL (with `.requests`)."""
    log: list = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler({k: Path(v) for k, v in repos.items()}, log))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    class Endpoint(str):
        requests = log

    try:
        yield Endpoint(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
