"""`ttseval serve`: a store's HTML run reports over HTTP, read-only, on 127.0.0.1 unless told otherwise.

Needed where the store is S3 (a browser cannot read s3:// links) or where a team shares one machine's store.
Only what the reports link to is served: runs/<run>/html/*, runs/<run>/figures/*.png,
runs/<run>/listening/<test>/*.png and the audio blobs (streamed from the store in chunks, with HTTP Range
requests answered so players can seek). GET and HEAD only; nothing else of the store (tables, logs, caches,
test keys) is reachable. The standard library's threaded HTTP server does this well enough for a handful of
people listening; it is not hardened for the open internet, so it binds to loopback by default.
"""

from __future__ import annotations

import html
import logging
import re
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

from ttseval.core.store import ArtifactStore

SERVED = re.compile(
    r"runs/[^/]+/(html/[A-Za-z0-9_.-]+|figures/[^/]+\.png|listening/[^/]+/[^/]+\.png)"
    r"|blobs/audio/[0-9a-f]{2}/[0-9a-f]{64}\.wav"
)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css",
    ".png": "image/png",
    ".wav": "audio/wav",
}
CHUNK = 1 << 20
log = logging.getLogger("ttseval.serve")


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a single 'bytes=a-b' / 'bytes=a-' / 'bytes=-n' range; None for none or a bad one."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", header or "")
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):
        first, last = max(0, size - int(m.group(2))), size - 1
    else:
        first, last = int(m.group(1)), min(size - 1, int(m.group(2))) if m.group(2) else size - 1
    return (first, last) if first <= last < size else None


def handler_for(store: ArtifactStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "ttseval-serve"

        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), format % args)

        def _index(self) -> bytes:
            runs = [r for r in store.runs() if store.exists(f"runs/{r}/html/index.html")]
            items = "".join(
                f'<li><a href="runs/{html.escape(r)}/html/index.html">{html.escape(r)}</a></li>' for r in runs
            )
            return (
                f"<!doctype html><html lang=en><meta charset=utf-8><title>ttseval reports</title>"
                f"<h1>Run reports in {html.escape(store.display())}</h1><ul>{items or '<li>none yet</li>'}</ul>"
                "</html>"
            ).encode()

        def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path).lstrip("/")
            if path in ("", "index.html"):
                return self._send(HTTPStatus.OK, self._index(), TYPES[".html"])
            if not SERVED.fullmatch(path) or any(part in ("", ".", "..") for part in path.split("/")):
                return self._send(HTTPStatus.NOT_FOUND, b"not served\n")
            full = store.path(path)
            if store.is_local and not _inside(store.root, full):  # a symbolic link that points out of the store
                return self._send(HTTPStatus.NOT_FOUND, b"not served\n")
            info = store.fs.get_file_info(full)
            if info.type != pafs.FileType.File:
                return self._send(HTTPStatus.NOT_FOUND, b"no such file in the store\n")
            size = info.size
            suffix = path[path.rfind(".") :]
            wanted = _range(self.headers.get("Range"), size)
            if self.headers.get("Range") and wanted is None:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return None
            first, last = wanted or (0, size - 1)
            self.send_response(HTTPStatus.PARTIAL_CONTENT if wanted else HTTPStatus.OK)
            self.send_header("Content-Type", TYPES.get(suffix, "application/octet-stream"))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(last - first + 1))
            if wanted:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return None
            with store.fs.open_input_file(full) as src:  # random access: S3 ranged reads, not the whole object
                src.seek(first)
                left = last - first + 1
                while left > 0:
                    chunk = src.read(min(CHUNK, left))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
            return None

        do_HEAD = do_GET

        def _refuse(self) -> None:
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only\n")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    return Handler


def _inside(root: str, path: str) -> bool:
    """Whether local `path`, every symbolic link on the way followed, lies inside the folder `root`."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):  # a loop of links
        return False


def make_server(store_uri: str, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """The server, bound and ready (`serve_forever()` to run; port 0 picks a free one)."""
    server = ThreadingHTTPServer((host, port), handler_for(ArtifactStore(store_uri)))
    server.daemon_threads = True
    return server
