"""One writer per run id: a lease object in the store, taken atomically, renewed while the run lives.

Without it two invocations on one run id (a second `evaluate` started while the first still runs, its terminal
looking dead) each plan the same missing keys and each compute them: duplicate rows, and with a paid provider
every call paid twice. With it the second invocation is refused, naming who holds the run and since when, or
waits for it (`lease_wait_s`).

The lease is runs/<run_id>/.lease (a hidden name: table readers skip it), JSON: owner token, host, pid,
acquired_at, renewed_at. It is taken with an atomic create-if-absent: locally a hard link of the complete record to
the lease's name (it fails when the name exists, like O_EXCL, and no reader sees a half-written record); on S3 a
PUT with `If-None-Match: *` (S3's conditional write). The holder renews it every `ttl / 4` seconds (locally under
an flock; on S3 a PUT with `If-Match` on the ETag it last wrote, so a renewal never overwrites a lease that another
run took over). A lease is stale, and taken over with the same compare-and-swap, when its holder's process is
gone (same host: the pid no longer runs, e.g. after SIGKILL) or it was not renewed for `ttl` seconds (another
host, or a frozen process).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ttseval.core.errors import RunBusyError, StoreError
from ttseval.core.store import ArtifactStore, check_run_id, lease_path, write_error

DEFAULT_TTL_S = 120.0


def _now() -> datetime:
    return datetime.now(UTC)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Local:
    """Create-if-absent and compare-and-swap on a local file (an flock serialises the swap across processes)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def create(self, data: bytes) -> str | None:
        """The whole record appears at once or not at all: written to a temporary file, then hard-linked to the
        lease's name, which fails when the name exists (a reader never sees an empty or half-written lease)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return None
        finally:
            os.remove(tmp)
        return hashlib.sha256(data).hexdigest()

    def read(self) -> tuple[bytes, str] | None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl

        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def swap(self, data: bytes, token: str) -> str | None:
        with self._locked():
            current = self.read()
            if current is None or current[1] != token:
                return None
            tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
            return hashlib.sha256(data).hexdigest()

    def delete(self, token: str) -> None:
        with self._locked():
            current = self.read()
            if current is not None and current[1] == token:
                os.remove(self.path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path + ".lock")
        with contextlib.suppress(OSError):  # a run refused before it wrote anything leaves no folder behind
            os.rmdir(os.path.dirname(self.path))


class _S3:
    """The same on S3 with conditional requests (If-None-Match: * to create, If-Match: <ETag> to swap)."""

    def __init__(self, store: ArtifactStore, rel_path: str) -> None:
        import boto3

        from ttseval.core.store import _plain_s3_uploads, _s3_endpoint, require_s3_credentials

        require_s3_credentials(store.display())  # the lease is a run's first write
        _plain_s3_uploads()
        self.client = boto3.client("s3", endpoint_url=_s3_endpoint())
        self.bucket, _, self.key = store.path(rel_path).partition("/")
        self.root = store.display()

    @staticmethod
    def _refused(e: Exception) -> bool:
        code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
        return code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")

    def create(self, data: bytes) -> str | None:
        try:
            etag: str = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, IfNoneMatch="*")["ETag"]
            return etag
        except Exception as e:
            if self._refused(e):
                return None
            raise write_error(self.root, f"s3://{self.bucket}/{self.key}", e) from e  # refused or unreachable

    def read(self) -> tuple[bytes, str] | None:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.client.exceptions.NoSuchKey:
            return None
        return got["Body"].read(), got["ETag"]

    def swap(self, data: bytes, token: str) -> str | None:
        try:
            etag: str = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, IfMatch=token)["ETag"]
            return etag
        except Exception as e:
            if self._refused(e) or "NoSuchKey" in str(e):
                return None
            raise StoreError(f"cannot renew the run lease s3://{self.bucket}/{self.key}: {e}") from e

    def delete(self, token: str) -> None:
        current = self.read()
        if current is not None and current[1] == token:
            self.client.delete_object(Bucket=self.bucket, Key=self.key)


class RunLease:
    """The lease on one run id; `with RunLease(store, run_id):` holds it for the block (renewed meanwhile)."""

    def __init__(
        self, store: ArtifactStore, run_id: str, *, ttl_s: float = DEFAULT_TTL_S, wait_s: float = 0.0, purpose: str = ""
    ) -> None:
        self.store, self.run_id, self.ttl_s, self.wait_s = store, check_run_id(run_id), ttl_s, wait_s
        rel = lease_path(run_id)
        self.where = store.display(rel)
        self.backend: _Local | _S3 = _Local(store.path(rel)) if store.is_local else _S3(store, rel)
        self.owner = {
            "token": uuid.uuid4().hex,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "purpose": purpose,
            "acquired_at": _now().isoformat(),
        }
        self.etag: str | None = None
        self.taken_over: dict[str, Any] | None = None
        """The stale holder's record when this lease was taken over from it, else None."""
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        """This holder's token, in the lease record: a fenced write (ArtifactStore.check_fence) compares it."""
        return str(self.owner["token"])

    def _body(self) -> bytes:
        return json.dumps(self.owner | {"renewed_at": _now().isoformat(), "ttl_s": self.ttl_s}).encode()

    def stale(self, holder: dict[str, Any]) -> bool:
        """Its process is gone (same host), or it was not renewed within the ttl."""
        if holder.get("host") == socket.gethostname() and not _pid_alive(int(holder.get("pid", -1))):
            return True
        try:
            renewed = datetime.fromisoformat(holder["renewed_at"])
        except (KeyError, ValueError):
            return True
        return (_now() - renewed).total_seconds() > float(holder.get("ttl_s", self.ttl_s))

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lease; returns None when taken, else the holder's record (it stays theirs)."""
        self.etag = self.backend.create(self._body())
        if self.etag is not None:
            return None
        current = self.backend.read()
        if current is None:  # released between our create and read: try once more
            self.etag = self.backend.create(self._body())
            return None if self.etag is not None else {"host": "?", "pid": "?", "acquired_at": "?"}
        data, token = current
        try:
            holder: dict[str, Any] = json.loads(data)
        except ValueError:
            holder = {}
        if self.stale(holder):
            self.etag = self.backend.swap(self._body(), token)  # only one taker's swap matches the stale token
            if self.etag is not None:
                self.taken_over = holder
                return None
        return holder

    def acquire(self) -> RunLease:
        deadline = time.monotonic() + self.wait_s
        self.taken_over = None
        while True:
            try:
                holder = self.try_acquire()
            except OSError as e:  # a read-only or full local store: said as what to do, exit code 2
                raise write_error(self.store.display(), self.where, e) from e
            if holder is None:
                break
            if time.monotonic() >= deadline:
                raise RunBusyError(
                    f"run {self.run_id!r} is being written by another invocation ({holder.get('purpose') or 'a run'}"
                    f" on host {holder.get('host')}, pid {holder.get('pid')}, since {holder.get('acquired_at')}, "
                    f"last renewed {holder.get('renewed_at', '?')}); nothing was written. Wait for it to finish, "
                    f"use another --run-id, or give --wait-lease SECONDS. A lease whose process has died is taken "
                    f"over at once on the same host, and after {self.ttl_s:g} s without renewal from elsewhere "
                    f"({self.where})."
                )
            time.sleep(min(2.0, max(0.1, deadline - time.monotonic())))
        self._thread = threading.Thread(target=self._renew, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            if self.etag is None:  # nothing held to renew (the thread starts once the lease is taken)
                return
            try:
                etag = self.backend.swap(self._body(), self.etag)
            except (StoreError, OSError):
                continue  # the store is unreachable or refusing for now; the next renewal tries again
            if etag is None:
                self.lost = True  # another invocation took it over: we were too slow to renew
                return
            self.etag = etag

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.etag is not None and not self.lost:
            with contextlib.suppress(Exception):
                self.backend.delete(self.etag)

    def __enter__(self) -> RunLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
