"""The artifact store: Parquet part files and content-addressed audio blobs under one URI.

Layout under the root (a local folder, or s3://bucket/prefix on any S3-compatible server):

    runs/<run_id>/<table>/part-*.parquet   one immutable part per finished shard
    runs/<run_id>/report.md, log/*.json    the report and one record per invocation
    blobs/audio/<sha[:2]>/<sha>.wav        audio, addressed by SHA-256 of its bytes, stored once

Parts are committed atomically: locally a hidden temp file then a rename; on S3 an object appears only when its
upload completes. Readers ignore names starting with '.', so `pandas.read_parquet("<store>/runs/<id>/<table>")`
never sees a half-written part. Readers dedupe by key, newest `created_at` first.

S3 endpoint and credentials come from the standard AWS environment variables (AWS_ENDPOINT_URL[_S3],
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION); they are never written anywhere by ttseval.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ttseval.core.config import STORE_WAIT_S, Settings
from ttseval.core.errors import ConfigError, CorruptObjectError, LeaseLostError, StoreError, StoreUnwritableError
from ttseval.core.memory import give_back_freed_memory
from ttseval.core.schemas import TABLES

_UNREACHABLE = (
    "NETWORK_CONNECTION",
    "curlCode",
    "Could not connect",
    "Couldn't connect",
    "Timeout was reached",
    "timed out",
    "Connection refused",
    "Connection reset",
    "SERVICE_UNAVAILABLE",
    "SLOW_DOWN",
    "INTERNAL_FAILURE",
    "REQUEST_TIMEOUT",
    "THROTTLING",
    "(HTTP status 5",
    "HTTP response code: 5",
)
"""How pyarrow's S3 errors say that the server is down, cut off, restarting or busy, rather than refusing the
request (NoSuchKey, AccessDenied, a missing bucket): only these are waited out."""

_BOTOCORE_UNREACHABLE = {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"}
"""The same for boto3 (deletes), by exception class: botocore's connection errors."""

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def _s3_endpoint() -> str | None:
    """The S3 endpoint the AWS variables name (a MinIO or moto server), or None for AWS itself."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _plain_s3_uploads() -> None:
    """Every object's bytes are its content: without this, an upload the AWS SDK does not sign (no credentials)
    is sent with aws-chunked framing and a trailing checksum, which moto and MinIO stored as the object
    (`8\r\n{...}\r\n0\r\nx-amz-checksum-crc64nvme:...`). Both SDKs (pyarrow's C++ one and botocore) read this
    variable when they make a client; a value the user set is kept."""
    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")


_credentials_found: dict[int, bool] = {}
S3_CREDENTIALS = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or an instance role)"


def require_s3_credentials(uri: str) -> None:
    """Refuse to write to an S3 store when the AWS SDK's credential chain finds none (environment, profile,
    container or instance role), before anything is sent.

    Raises:
        StoreUnwritableError: no credentials (exit code 2), naming the variables to set.
    """
    # looked up once per process and AWS environment, not for every store and task
    where = hash(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))
    if where not in _credentials_found:
        import botocore.session

        _credentials_found[where] = botocore.session.get_session().get_credentials() is not None
    if not _credentials_found[where]:
        raise StoreUnwritableError(
            f"the store {uri} cannot be written without S3 credentials, and none were found: set {S3_CREDENTIALS}; "
            "nothing was written",
            uri=uri,
        )


def _s3_filesystem() -> pafs.S3FileSystem:
    _plain_s3_uploads()
    endpoint = _s3_endpoint()
    kwargs: dict[str, str] = {
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    }
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
    # Credentials: pyarrow reads the AWS SDK's default chain (environment, profile, instance role) itself.
    return pafs.S3FileSystem(**kwargs)


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A run id: the folder `runs/<run id>` of a store, so one path component, never `..`, `/` or a hidden name."""


def check_run_id(run_id: str) -> str:
    """`run_id` if it is one (RUN_ID), else a ConfigError (exit code 2) saying what a run id may hold.

    Raises:
        ConfigError: `run_id` has a character outside [A-Za-z0-9._-], starts with '.', '_' or '-', or is empty or
            longer than 128 characters.
    """
    if isinstance(run_id, str) and RUN_ID.fullmatch(run_id):
        return run_id
    fix = part_label(str(run_id))[:128] or "my-run"
    raise ConfigError(
        f"run id {run_id!r}: a run id names the folder runs/<run id> inside the store, so it takes letters, "
        f"digits, '.', '_' and '-' only, starts with a letter or digit and has at most 128 characters "
        f"(for example {fix!r})"
    )


def lease_path(run_id: str) -> str:
    """The run's lease object under the store's root (a hidden name: table readers skip it; core/lease.py)."""
    return f"runs/{check_run_id(run_id)}/.lease"


def part_label(label: str) -> str:
    """A part's label as its file name carries it: never a path, only [A-Za-z0-9._-]."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.")


def write_error(root: str, uri: str, e: OSError | Exception) -> StoreError:
    """A failed write said as what the user must do: a full or read-only store (StoreUnwritableError, exit code 2,
    not retried) or another failure (StoreError, retried as a store hiccup)."""
    code, text = getattr(e, "errno", None), str(e)
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text:
        return StoreUnwritableError(
            f"the store {root} is full (no space left on device) writing {uri}: free space there or point --store "
            f"at another place; what was stored before is intact, and the same --run-id resumes from it",
            uri=uri,
        )
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or any(
        s in text for s in ("Read-only file system", "Permission denied", "ACCESS_DENIED", "AccessDenied")
    ):
        why = "read-only" if code == errno.EROFS or "Read-only" in text else "not writable by this process"
        return StoreUnwritableError(
            f"the store {root} is {why} (writing {uri}): point --store at a writable place, or give this process "
            f"write access there; nothing stored there was changed",
            uri=uri,
        )
    return StoreError(f"cannot write {uri}: {e}", uri=uri)


def unreachable(e: BaseException) -> bool:
    """Whether an S3 error says the store could not be reached (worth waiting for) rather than refused the request."""
    if {c.__name__ for c in type(e).__mro__} & _BOTOCORE_UNREACHABLE:  # some of them are OSErrors too
        return True
    if isinstance(e, OSError):
        return any(s in str(e) for s in _UNREACHABLE)
    response = getattr(e, "response", None)  # a botocore ClientError: the HTTP status it came with
    return isinstance(response, dict) and response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500


COMPACT_WINDOW = 16_384  # rows compaction holds at once (a row group), besides the key columns of the whole table


def new_part_name(label: str = "") -> str:
    """A new part's file name: its time, label and a random suffix, so names sort by when they were written."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    label = part_label(label)
    return f"part-{stamp}-{label + '-' if label else ''}{uuid.uuid4().hex[:8]}.parquet"


class _Pending:
    """A write-only file that keeps what was written until `take`n: ParquetWriter's output, handed on in pieces."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.written = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.pieces.append(bytes(data))
        self.written += len(data)
        return len(data)

    def tell(self) -> int:
        return self.written

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.pieces = b"".join(self.pieces), []
        return out


def parquet_chunks(tables: Iterable[pa.Table]) -> Iterable[bytes]:
    """One zstd Parquet file of these tables (one schema), as byte pieces made while the tables come: a row group
    per table, so only one of them is in memory at a time."""
    sink = _Pending()
    writer: pq.ParquetWriter | None = None
    for t in tables:
        if writer is None:
            writer = pq.ParquetWriter(sink, t.schema, compression="zstd")
        writer.write_table(t)
        yield sink.take()
    if writer is not None:
        writer.close()
    yield sink.take()


def newest_per_key(data: pa.Table, key: list[str]) -> pa.Table:
    """One row per `key`, the newest by `created_at` (where the table has it; else the last in order), the rows in
    `created_at` order: what `ArtifactStore.read` returns, computed in Arrow (a pandas stable sort and
    drop_duplicates(keep="last") give the same rows in the same order; tests/unit/test_store.py checks it)."""
    if data.num_rows == 0:
        return data
    order = (
        pc.sort_indices(data, sort_keys=[("created_at", "ascending")]).to_numpy()  # stable
        if "created_at" in data.column_names
        else np.arange(data.num_rows)
    )
    position = "__position"  # a row's place in created_at order; the key columns alone are reordered
    numbered = data.select(key).take(order).append_column(position, pa.array(np.arange(data.num_rows)))
    last = numbered.group_by(key, use_threads=False).aggregate([(position, "max")])[f"{position}_max"]
    keep = order[np.sort(last.to_numpy())]
    if len(keep) == data.num_rows and bool((keep == np.arange(data.num_rows)).all()):
        return data  # every key once, already in created_at order (a compacted table): no copy
    return data.take(keep)  # the whole table copied once


class ArtifactStore:
    """Tables and blobs under one URI. Cheap to construct; safe to rebuild in every worker from its URI.

    On S3, an operation that cannot reach the store (the server restarting, its host cut off, a 5xx) is tried again,
    with backoff from 0.5 s to 8 s, until `wait_s` seconds have passed since its first failure; then it raises
    StoreError saying how long it waited. The AWS SDK's own retries (about 1 s) are not enough to ride out a
    restart, and they count attempts, not time. Each retry repeats a whole PUT or read: an object appears whole or
    not at all, so a repeat never leaves half of one. A local store is not waited for."""

    def __init__(self, uri: str, *, wait_s: float = STORE_WAIT_S) -> None:
        self.uri = uri.rstrip("/") or uri
        self.wait_s = wait_s
        self._given_up = False
        self._s3_client: Any = None  # boto3, made on the first delete (ArtifactStore.delete)
        if uri.startswith("s3://"):
            rest = uri[len("s3://") :].strip("/")
            if not rest:
                raise StoreError(f"store URI {uri!r} names no bucket; use s3://bucket/prefix", uri=uri)
            self.fs: pafs.FileSystem = _s3_filesystem()
            self.root = rest
            self.is_local = False
        elif "://" in uri and not uri.startswith("file://"):
            raise StoreError(f"store URI {uri!r}: only local folders and s3://bucket/prefix are supported", uri=uri)
        else:
            path = uri[len("file://") :] if uri.startswith("file://") else uri
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(path)
            self.is_local = True

    def __getstate__(self) -> dict[str, Any]:
        # a boto3 client does not pickle: the copy makes its own; and it waits for the store afresh
        return self.__dict__ | {"_s3_client": None, "_given_up": False}

    # paths ---------------------------------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def display(self, *parts: str) -> str:
        """A URI a person (or pandas) can open."""
        return self.path(*parts) if self.is_local else "s3://" + self.path(*parts)

    def table_dir(self, run_id: str, table: str) -> str:
        return self.path("runs", check_run_id(run_id), table)

    # bytes ---------------------------------------------------------------------------------------------------
    def _patiently(self, op: Callable[[], _T], what: str) -> _T:
        """`op()`, tried again while the store cannot be reached, for up to `wait_s` seconds (S3 only)."""
        deadline, delay = None, 0.5
        while True:
            try:
                result = op()
                self._given_up = False
                return result
            except Exception as e:
                if self.is_local or not unreachable(e):
                    raise
                now = time.monotonic()
                if self._given_up:  # a wait has run out: later operations fail at once until one succeeds
                    raise StoreError(
                        f"cannot reach the store {self.display()} ({what}; still, after an earlier "
                        f"operation waited {self.wait_s:g} s, the store_wait_s setting): {e}",
                        uri=self.display(),
                    ) from e
                if deadline is None:
                    deadline = now + self.wait_s
                    log.warning(
                        "the store %s cannot be reached (%s); trying again for up to %g s",
                        self.display(),
                        what,
                        self.wait_s,
                    )
                if now >= deadline:
                    self._given_up = True
                    raise StoreError(
                        f"cannot reach the store {self.display()} ({what}; waited {self.wait_s:g} s, "
                        f"the store_wait_s setting): {e}",
                        uri=self.display(),
                    ) from e
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 8.0)

    def write_bytes(self, rel_path: str, data: bytes) -> str:
        """Write `data` at `rel_path` under the root atomically; returns the full path."""
        try:
            return self._patiently(lambda: self._put(rel_path, data), f"writing {rel_path}")
        except OSError as e:
            raise write_error(self.display(), self.display(rel_path), e) from e

    def write_chunks(self, rel_path: str, chunks: Callable[[], Iterable[bytes]]) -> str:
        """`write_bytes` of the concatenated `chunks()`, written as they come, so the whole is never in memory at
        once (a report page's data at 100,000 clips is tens of megabytes); `chunks` is called again on a retry."""
        try:
            return self._patiently(lambda: self._put(rel_path, chunks), f"writing {rel_path}")
        except OSError as e:
            raise write_error(self.display(), self.display(rel_path), e) from e

    def _put(self, rel_path: str, data: bytes | Callable[[], Iterable[bytes]]) -> str:
        pieces = (data,) if isinstance(data, bytes) else data()
        final = self.path(rel_path)
        tmp = None
        try:
            if self.is_local:  # S3 has no folders: creating one there only leaves a marker object
                self.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
                directory, name = final.rsplit("/", 1)
                tmp = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
                with self.fs.open_output_stream(tmp) as out:
                    for piece in pieces:
                        out.write(piece)
                self.fs.move(tmp, final)
            else:  # one PUT (or one multipart upload): the object appears whole or not at all
                require_s3_credentials(self.display())
                with self.fs.open_output_stream(final) as out:
                    for piece in pieces:
                        out.write(piece)
        except OSError:
            if tmp is not None:  # a write that failed half-way leaves nothing behind (a dot-file is never a part)
                with contextlib.suppress(OSError):
                    self.fs.delete_file(tmp)
            raise
        return final

    def read_bytes(self, rel_path: str) -> bytes:
        def read() -> bytes:
            with self.fs.open_input_stream(self.path(rel_path)) as src:
                data: bytes = src.read()
                return data

        try:
            return self._patiently(read, f"reading {rel_path}")
        except (OSError, FileNotFoundError) as e:
            raise StoreError(f"cannot read {self.display(rel_path)}: {e}", uri=self.display(rel_path)) from e

    def read_json(self, rel_path: str) -> Any:
        """A JSON object the store holds (a catalog manifest). Its bytes not JSON: CorruptObjectError naming it, how
        it begins and the fix (one bad object must not stop every command that lists the catalog with a traceback)."""
        data = self.read_bytes(rel_path)
        try:
            return json.loads(data)
        except ValueError as e:  # json.JSONDecodeError, or bytes that are not UTF-8
            raise CorruptObjectError(
                f"{self.display(rel_path)} is not JSON (it begins {data[:24]!r}): it was stored corrupt (an S3 server "
                "that kept the upload's chunk framing stores such objects); `ttseval store repair` sets it aside, "
                "then push again what it described",
                uri=self.display(rel_path),
            ) from e

    def read_part(self, path: str, *, columns: list[str] | None = None, schema: pa.Schema | None = None) -> pa.Table:
        """One part file (a full path, as `part_files` lists them), waited for like every store read."""

        def read() -> pa.Table:
            with self.fs.open_input_file(path) as f:
                return pq.read_table(f, columns=columns, schema=schema)

        try:
            return self._patiently(read, f"reading {path.rsplit('/', 1)[-1]}")
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e}", uri=path) from e

    def _info(self, what: Any) -> Any:
        """fs.get_file_info, with an unreachable or refusing store said as a StoreError naming the store."""
        try:
            return self._patiently(lambda: self.fs.get_file_info(what), "listing")
        except OSError as e:
            raise StoreError(f"cannot reach the store {self.display()}: {e}", uri=self.display()) from e

    def exists(self, rel_path: str) -> bool:
        return bool(self._info(self.path(rel_path)).type != pafs.FileType.NotFound)

    def delete(self, full_path: str) -> None:
        """Delete one file (a full path, as `part_files` lists them). On S3 this is one DeleteObject through boto3:
        pyarrow's S3 delete_file writes an empty "folder/" marker object after every delete (to keep the parent
        "directory"), which would litter the bucket with keys no S3 user expects."""
        if self.is_local:
            self.fs.delete_file(full_path)
            return
        bucket, _, key = full_path.partition("/")
        try:
            if self._s3_client is None:  # one client per store: compaction deletes hundreds of parts
                import boto3

                self._s3_client = boto3.client("s3", endpoint_url=_s3_endpoint())
            self._patiently(lambda: self._s3_client.delete_object(Bucket=bucket, Key=key), f"deleting {key}")
        except Exception as e:
            raise StoreError(f"cannot delete s3://{full_path}: {e}", uri=f"s3://{full_path}") from e

    # audio blobs ---------------------------------------------------------------------------------------------
    @staticmethod
    def audio_rel_path(sha256: str) -> str:
        return f"blobs/audio/{sha256[:2]}/{sha256}.wav"

    def put_audio(self, wav: bytes, sha256: str) -> str:
        """Store a WAV blob under its SHA-256 unless it is already there; returns its URI."""
        rel = self.audio_rel_path(sha256)
        if not self.exists(rel):
            self.write_bytes(rel, wav)
        return self.display(rel)

    def get_audio(self, sha256: str) -> bytes:
        return self.read_bytes(self.audio_rel_path(sha256))

    # tables --------------------------------------------------------------------------------------------------
    def write_part(
        self, run_id: str, table: str, data: pa.Table, *, label: str = "", fence: str | None = None
    ) -> str | None:
        """Commit `data` as one new immutable part of `runs/<run_id>/<table>`; returns its path (None if empty).

        With `fence` (the writing invocation's lease token, settings.lease_token) the part is committed only while
        the run's lease is still that token's: a writer that lost the lease commits nothing (LeaseLostError).
        """
        check_run_id(run_id)
        if data.num_rows == 0:
            return None
        if fence is not None:
            self.check_fence(run_id, fence)
        schema = TABLES[table].schema
        data = data.cast(schema) if data.schema != schema else data
        sink = pa.BufferOutputStream()
        pq.write_table(data, sink, compression="zstd")
        return self.write_bytes(f"runs/{run_id}/{table}/{new_part_name(label)}", sink.getvalue().to_pybytes())

    def check_fence(self, run_id: str, token: str) -> None:
        """Refuse a commit by an invocation whose lease on `run_id` another has taken over (or that is gone).

        Raises:
            LeaseLostError: the lease names another holder, or none.
        """
        try:
            holder = json.loads(self.read_bytes(lease_path(run_id)))
        except StoreError as e:
            if not isinstance(e.__cause__, FileNotFoundError):
                raise  # the store cannot be read now: a transient error, the task is tried again
            holder = {}  # released by whoever took it over, and finished
        except ValueError:
            holder = {}
        if holder.get("token") != token:
            taker = (
                f"another ({holder.get('purpose') or 'a run'} on host {holder.get('host', '?')}, pid "
                f"{holder.get('pid', '?')}, since {holder.get('acquired_at', '?')})"
                if holder
                else "another, which has finished and released it"
            )
            raise LeaseLostError(
                f"run {run_id!r}: this invocation's lease was taken over by {taker} while it was frozen or cut off "
                "for longer than its lease_ttl_s; it commits nothing more. Run the same command again afterwards: it "
                "computes only what is missing."
            )

    def part_files(self, run_id: str, table: str) -> list[str]:
        selector = pafs.FileSelector(self.table_dir(run_id, table), allow_not_found=True)
        infos = self._info(selector)
        return sorted(
            i.path
            for i in infos
            if i.type == pafs.FileType.File
            and i.base_name.endswith(".parquet")
            and not i.base_name.startswith((".", "_"))
        )

    def read(
        self, run_id: str, table: str, *, columns: list[str] | None = None, where: pc.Expression | None = None
    ) -> pd.DataFrame:
        """All rows of a run's table, one per key (the newest), typed by the declared schema.

        `columns` and `where` (a pyarrow expression, e.g. `pc.field("status") == "ok"`) are pushed down to the
        Parquet scan, so only those columns and the row groups that can match are read. The key and `created_at`
        are read too (they decide which row of a key is the newest) and dropped again unless asked for. A row
        filter applies before deduplication: use it on columns a key's newer row does not change (system_id,
        item_id), or read whole and filter after.
        """
        return self._read_parts(run_id, table, self.part_files(run_id, table), columns, where)

    def _read_parts(
        self, run_id: str, table: str, files: list[str], columns: list[str] | None, where: pc.Expression | None
    ) -> pd.DataFrame:
        """`read` over exactly these part files."""
        definition = TABLES[table]
        wanted = list(definition.schema.names) if columns is None else list(columns)
        unknown = [c for c in wanted if c not in definition.schema.names]
        if unknown:
            raise KeyError(f"table {table!r} has no column(s) {unknown}; columns: {definition.schema.names}")
        extra = [c for c in (*definition.key, "created_at") if c in definition.schema.names and c not in wanted]
        if not files:
            return definition.schema.empty_table().select(wanted).to_pandas()
        frame = self._newest(run_id, table, files, wanted + extra, where).to_pandas()
        return frame[wanted] if extra else frame

    def _newest(
        self, run_id: str, table: str, files: list[str], columns: list[str] | None, where: pc.Expression | None
    ) -> pa.Table:
        """These part files' rows of `columns` (all: None) matching `where`, one per key (`newest_per_key`)."""
        definition = TABLES[table]
        try:
            data = self._patiently(
                lambda: ds.dataset(files, schema=definition.schema, format="parquet", filesystem=self.fs).to_table(
                    columns=columns, filter=where
                ),
                f"reading table {table!r} of run {run_id!r}",
            )
        except (OSError, pa.ArrowInvalid) as e:
            raise StoreError(f"cannot read table {table!r} of run {run_id!r}: {e}", uri=self.display()) from e
        return newest_per_key(data, list(definition.key))

    def compact(self, run_id: str, table: str) -> tuple[int, int]:
        """Rewrite a table of many parts as one part holding its rows (the newest per key, as `read` returns
        them); returns (parts before, parts after). It deletes only the parts it read, so a part another writer
        commits meanwhile survives. A crash midway leaves the old parts beside the new one, which readers dedupe to
        the same rows; a table of one part is left as it is."""
        parts = self.part_files(run_id, table)
        if len(parts) <= 1:
            return len(parts), len(parts)
        definition = TABLES[table]
        key = list(definition.key)
        stamped = [*key, "created_at"] if "created_at" in definition.schema.names else key
        # which row of which part each kept row is, in the order `read` returns them: only the key columns of the
        # whole table are held, never all its columns (100,000 rows read whole: +270 MiB in the command)
        index = pa.concat_tables(
            self._numbered_keys(number, path, stamped, definition.schema) for number, path in enumerate(parts)
        )
        kept = newest_per_key(index, key)
        part_of, row_of = kept["__part"].to_numpy(), kept["__row"].to_numpy()
        del index, kept
        if len(part_of):
            rows = functools.partial(self._rows_in_order, parts, part_of, row_of, definition.schema)
            self.write_chunks(f"runs/{run_id}/{table}/{new_part_name('compacted')}", lambda: parquet_chunks(rows()))
        for path in parts:  # only the parts it read: one another writer committed meanwhile survives
            self.delete(path)
        give_back_freed_memory()  # the next table's (and the report's) peak is not added to this one's
        return len(parts), len(self.part_files(run_id, table))

    def _numbered_keys(self, number: int, path: str, columns: list[str], schema: pa.Schema) -> pa.Table:
        """A part's `columns` (typed by `schema`) with its number (`__part`) and each row's place in it (`__row`)."""
        keys = self.read_part(path, columns=columns, schema=schema)
        keys = keys.append_column("__part", pa.array(np.full(keys.num_rows, number, dtype=np.int32)))
        return keys.append_column("__row", pa.array(np.arange(keys.num_rows, dtype=np.int64)))

    def _rows_in_order(
        self, parts: list[str], part_of: np.ndarray, row_of: np.ndarray, schema: pa.Schema
    ) -> Iterable[pa.Table]:
        """The rows (`part_of`[i], `row_of`[i]) of these parts, in that order, COMPACT_WINDOW rows at a time; a part
        is read when a window first needs it and dropped after the last window that does."""
        windows = range(0, len(part_of), COMPACT_WINDOW)
        last_window = {
            int(p): w for w, start in enumerate(windows) for p in np.unique(part_of[start : start + COMPACT_WINDOW])
        }
        loaded: dict[int, pa.Table] = {}
        for w, start in enumerate(windows):
            parts_here, rows_here = part_of[start : start + COMPACT_WINDOW], row_of[start : start + COMPACT_WINDOW]
            pieces, places = [], []
            for p in np.unique(parts_here):
                p = int(p)
                if p not in loaded:
                    loaded[p] = self.read_part(parts[p], schema=schema)
                mine = np.flatnonzero(parts_here == p)
                pieces.append(loaded[p].take(rows_here[mine]))
                places.append(mine)
                if last_window[p] == w:
                    del loaded[p]
            yield pa.concat_tables(pieces).take(np.argsort(np.concatenate(places), kind="stable"))

    def supersede(self, run_id: str, table: str, keys: set[tuple[Any, ...]], *, keep: str) -> int:
        """Drop `keys` from every part but `keep` (rows recomputed after a retryable failure); returns rows dropped.

        Parts are rewritten atomically, so a crash leaves either the old or the new part, and readers dedupe anyway.
        """
        if not keys:
            return 0
        key_cols = list(TABLES[table].key)
        dropped = 0
        for path in self.part_files(run_id, table):
            if path == keep:
                continue
            frame = self.read_part(path).to_pandas()
            stale = frame[key_cols].apply(tuple, axis=1).isin(keys)
            if not stale.any():
                continue
            dropped += int(stale.sum())
            rel = path[len(self.root) + 1 :]
            if stale.all():
                self.delete(path)
            else:
                sink = pa.BufferOutputStream()
                kept = pa.Table.from_pandas(frame[~stale], schema=TABLES[table].schema, preserve_index=False)
                pq.write_table(kept, sink, compression="zstd")
                self.write_bytes(rel, sink.getvalue().to_pybytes())
        return dropped

    def replace_table(
        self, run_id: str, table: str, data: pa.Table, *, label: str = "all", replacing: list[str] | None = None
    ) -> str:
        """Make `data` the whole table (for derived tables such as the report): new part first, then the old ones go,
        `replacing` if given (the parts `data` was read from), else every part there before the new one."""
        old = self.part_files(run_id, table) if replacing is None else replacing
        new = self.write_part(run_id, table, data, label=label) or ""
        for path in old:
            self.delete(path)
        return new

    def is_new(self) -> bool:
        """Whether nothing is stored under the root yet (no folder, or an empty one; no object under the prefix)."""
        return not self._info(pafs.FileSelector(self.root, allow_not_found=True))

    def require(self, run_id: str | None = None) -> None:
        """Refuse a store that holds nothing, or (given `run_id`) a run it does not hold, with one error for every
        command that reads a run (report, export, serve, leaderboard): NotFoundError, naming the runs there.

        Raises:
            NotFoundError: the store is empty or missing, or it holds no run `run_id`.
        """
        from ttseval.core.errors import NotFoundError

        if self.is_new():
            raise NotFoundError(
                f"no store at {self.display()}: nothing is stored there; check --store (or the TTSEVAL_STORE variable)",
                uri=self.display(),
            )
        if run_id is not None and not self.part_files(run_id, "items"):
            raise NotFoundError(
                f"no run {run_id!r} in {self.display()}; runs there: {', '.join(self.runs()) or 'none'}"
                "; check --run-id and --store",
                uri=self.display(),
                run_id=run_id,
            )

    def listing(self, rel_dir: str) -> dict[str, int]:
        """Every file under `rel_dir`, recursively, by its path relative to it, with its size in bytes (one listing
        call; empty when the folder does not exist)."""
        top = self.path(rel_dir)
        infos = self._info(pafs.FileSelector(top, recursive=True, allow_not_found=True))
        return {i.path[len(top) + 1 :]: i.size for i in infos if i.type == pafs.FileType.File}

    def runs(self) -> list[str]:
        """The run ids under runs/ (a folder there that is no run id, such as `.ipynb_checkpoints`, is none)."""
        infos = self._info(pafs.FileSelector(self.path("runs"), allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and RUN_ID.fullmatch(i.base_name))

    def run_logs(self, run_id: str) -> list[dict[str, Any]]:
        """Every invocation's record of this run (runs/<id>/log/<started>.json), oldest first; each names its
        `command` (an evaluate's record before the field existed has none)."""
        names = sorted(
            name for name in self.listing(f"runs/{run_id}/log") if name.endswith(".json") and "/" not in name
        )
        return [json.loads(self.read_bytes(f"runs/{run_id}/log/{name}")) for name in names]

    def run_log(self, run_id: str) -> dict[str, Any] | None:
        """The latest record an evaluate wrote of this run (its systems, baseline, settings), or None when it has
        none; a backfill's record is not one."""
        evaluated = [r for r in self.run_logs(run_id) if r.get("command", "evaluate") == "evaluate"]
        return evaluated[-1] if evaluated else None


def open_store(settings: Settings) -> ArtifactStore:
    """The store `settings` names, waiting up to its `store_wait_s` for it when it cannot be reached."""
    return ArtifactStore(settings.store, wait_s=settings.store_wait_s)
