"""The artifact store, parametrized over a local folder and a real S3-compatible server (moto) on loopback."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from ttseval.core.errors import StoreError
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path) -> ArtifactStore:
    if request.param == "local":
        return ArtifactStore(str(tmp_path / "store"))
    bucket = request.getfixturevalue("s3_bucket")
    return ArtifactStore(f"s3://{bucket}/some/prefix")


def _row(item: str, status: str, at: datetime, **extra) -> dict:
    return {"item_id": item, "system_id": "sys", "system_spec": "espeak-ng", "status": status, "created_at": at} | extra


def test_parts_round_trip_and_dedupe_by_key_newest_first(store: ArtifactStore) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    first = store.write_part(
        "r",
        "synthesis",
        table_from_rows(
            "synthesis",
            [
                _row("a", "failed", t0, retryable=True, error_type="TransientProviderError"),
                _row("b", "ok", t0, duration_s=1.5),
            ],
        ),
    )
    second = store.write_part(
        "r",
        "synthesis",
        table_from_rows("synthesis", [_row("a", "ok", t0 + timedelta(seconds=1), duration_s=2.0)]),
        label="shard 1/2",
    )
    assert "shard-1-2" in second and len(store.part_files("r", "synthesis")) == 2
    frame = store.read("r", "synthesis").set_index("item_id")
    assert frame.loc["a", "status"] == "ok" and frame.loc["a", "duration_s"] == 2.0
    assert frame.loc["b", "duration_s"] == 1.5 and len(frame) == 2
    # after superseding, a raw read of the folder sees each key once
    assert store.supersede("r", "synthesis", {("a", "sys")}, keep=second) == 1
    assert first in store.part_files("r", "synthesis")
    raw = store.read("r", "synthesis")
    assert sorted(raw["item_id"]) == ["a", "b"]


def test_compaction_keeps_the_rows_a_reader_sees_and_filters_push_down(store: ArtifactStore) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for shard in range(5):  # 5 parts of 4 rows; item i{0..3} is rewritten by every later shard (newest wins)
        store.write_part(
            "r",
            "synthesis",
            table_from_rows(
                "synthesis",
                [
                    _row(
                        f"i{k}",
                        "ok" if (k + shard) % 2 else "failed",
                        t0 + timedelta(seconds=shard),
                        duration_s=float(shard),
                    )
                    for k in range(shard, shard + 4)
                ],
            ),
            label=f"shard {shard}",
        )
    before = store.read("r", "synthesis")
    assert len(before) == 8 and len(store.part_files("r", "synthesis")) == 5
    assert store.compact("r", "synthesis") == (5, 1)
    after = store.read("r", "synthesis")
    pd.testing.assert_frame_equal(
        before.sort_values("item_id").reset_index(drop=True), after.sort_values("item_id").reset_index(drop=True)
    )
    [part] = store.part_files("r", "synthesis")
    assert "compacted" in part and pq.read_metadata(part, filesystem=store.fs).num_rows == 8
    assert store.compact("r", "synthesis") == (1, 1)  # nothing to do
    if not store.is_local:  # deleting the old parts left no "folder/" marker objects (pyarrow's S3 delete does)
        import boto3

        bucket, _, prefix = store.root.partition("/")
        keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
        assert [k for k in keys if k.startswith(prefix)] and not [k for k in keys if k.endswith("/")], keys
    # column and row filters: only what was asked for comes back, deduped the same way
    some = store.read("r", "synthesis", columns=["item_id", "duration_s"], where=pc.field("item_id").isin(["i3", "i7"]))
    assert list(some.columns) == ["item_id", "duration_s"]
    assert some.set_index("item_id")["duration_s"].to_dict() == {"i3": 3.0, "i7": 4.0}
    assert store.read("nothing", "synthesis", columns=["status"]).columns.tolist() == ["status"]
    with pytest.raises(KeyError, match="wer"):
        store.read("r", "synthesis", columns=["wer"])


def test_missing_table_reads_empty_with_schema(store: ArtifactStore) -> None:
    frame = store.read("nothing", "transcripts")
    assert frame.empty and "wer" in frame.columns and "asr_id" in frame.columns


def test_audio_is_content_addressed_and_stored_once(store: ArtifactStore) -> None:
    uri = store.put_audio(b"RIFF-fake", "ab" + "0" * 62)
    again = store.put_audio(b"RIFF-fake", "ab" + "0" * 62)
    assert uri == again and uri.endswith("blobs/audio/ab/ab" + "0" * 62 + ".wav")
    assert store.get_audio("ab" + "0" * 62) == b"RIFF-fake"
    with pytest.raises(StoreError, match="cannot read"):
        store.get_audio("cd" + "0" * 62)


def test_replace_table_leaves_one_part(store: ArtifactStore) -> None:
    import pyarrow as pa

    from ttseval.core.schemas import REPORT

    for n in (1, 2):
        frame = pd.DataFrame([{"system_id": f"s{n}"}]).reindex(columns=REPORT.names)
        store.replace_table("r", "report", pa.Table.from_pandas(frame, schema=REPORT, preserve_index=False))
    assert len(store.part_files("r", "report")) == 1
    assert store.read("r", "report")["system_id"].tolist() == ["s2"]


def test_pandas_reads_a_table_folder_directly(store: ArtifactStore, s3_server) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.write_part("r", "synthesis", table_from_rows("synthesis", [_row("a", "ok", t0)]))
    store.write_part("r", "synthesis", table_from_rows("synthesis", [_row("b", "ok", t0)]))
    frame = pd.read_parquet(store.display("runs", "r", "synthesis"))
    assert sorted(frame["item_id"]) == ["a", "b"]


def test_bad_uris_are_refused() -> None:
    with pytest.raises(StoreError, match="names no bucket"):
        ArtifactStore("s3://")
    with pytest.raises(StoreError, match="only local folders and s3"):
        ArtifactStore("gs://bucket/x")


def test_what_counts_as_a_store_that_cannot_be_reached() -> None:
    """Waited for: pyarrow's errors for a server that is down, silent, restarting or answering 5xx (their texts as
    pyarrow 26 builds them from the AWS SDK's error), and botocore's connection errors and 5xx answers (deletes go
    through boto3). Not waited for: a refusal, which a second try cannot change."""
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    from ttseval.core.store import unreachable

    waited = [
        OSError(
            "When getting information for key 'x' in bucket 'b': AWS Error NETWORK_CONNECTION during "
            "HeadObject operation: curlCode: 7, Could not connect to server"
        ),
        OSError("AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 28, Timeout was reached"),
        OSError("AWS Error UNKNOWN (HTTP status 502) during PutObject operation: Bad Gateway"),
        OSError("AWS Error SLOW_DOWN during PutObject operation: Please reduce your request rate."),
        EndpointConnectionError(endpoint_url="http://10.0.0.1:9000"),
        ReadTimeoutError(endpoint_url="http://10.0.0.1:9000"),
        ClientError(
            {"Error": {"Code": "ServiceUnavailable"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "DeleteObject"
        ),
    ]
    refused = [
        OSError("AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: The specified bucket does not exist"),
        OSError("AWS Error ACCESS_DENIED during PutObject operation: Access Denied"),
        FileNotFoundError("Path does not exist 'b/x'"),
        ClientError({"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "DeleteObject"),
        ValueError("not a store error at all"),
    ]
    assert [unreachable(e) for e in waited] == [True] * len(waited)
    assert [unreachable(e) for e in refused] == [False] * len(refused)


def test_compaction_in_windows_writes_the_rows_read_returns_in_its_order(
    store: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction holds a few rows at a time (COMPACT_WINDOW, here 7): parts whose times interleave, keys
    rewritten by later parts, compacted into one part whose rows, as stored, are those the pandas computation
    gives (a stable sort by created_at, then drop_duplicates(keep="last")), in that order, one row group per
    window."""
    import numpy as np
    import pyarrow.parquet as pq

    import ttseval.core.store as store_module

    monkeypatch.setattr(store_module, "COMPACT_WINDOW", 7)
    rng = np.random.default_rng(3)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    written = []
    for shard in range(6):  # each part's rows span the whole time range, so every window needs several parts
        rows = [
            _row(f"i{k}", "ok", t0 + timedelta(seconds=int(rng.integers(0, 40))), duration_s=float(10 * shard + n))
            for n, k in enumerate(rng.choice(30, size=8, replace=False))
        ]
        store.write_part("r", "synthesis", table_from_rows("synthesis", rows), label=f"shard {shard}")
        written += rows
    frame = pd.DataFrame(written)
    expected = frame.sort_values("created_at", kind="stable").drop_duplicates(["item_id", "system_id"], keep="last")
    assert 7 * 2 < len(expected) < len(frame)  # several windows, and repeats to drop
    assert store.compact("r", "synthesis") == (6, 1)
    [part] = store.part_files("r", "synthesis")
    with store.fs.open_input_file(part) as f:
        stored = pq.ParquetFile(f)
        assert stored.metadata.num_row_groups == -(-len(expected) // 7)
        as_stored = stored.read().to_pandas()
    assert as_stored["item_id"].tolist() == expected["item_id"].tolist()
    assert as_stored["duration_s"].tolist() == expected["duration_s"].tolist()
    assert store.read("r", "synthesis")["duration_s"].tolist() == expected["duration_s"].tolist()


def test_a_part_another_writer_commits_while_compaction_reads_survives_it(
    store: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction deletes only the parts it read: a second writer's part committed between compaction's read and
    its deletes stays, and its row is read after."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for item in ("a", "b"):
        store.write_part("r", "synthesis", table_from_rows("synthesis", [_row(item, "ok", t0)]))
    other_writer = ArtifactStore(store.root if store.is_local else f"s3://{store.root}")
    real_read_part = store.read_part

    def read_part_while_another_writer_commits(path, **kwargs):
        if len(other_writer.part_files("r", "synthesis")) == 2:  # once, while compaction reads its two parts
            row = _row("c", "ok", t0 + timedelta(seconds=1))
            other_writer.write_part("r", "synthesis", table_from_rows("synthesis", [row]))
        return real_read_part(path, **kwargs)

    monkeypatch.setattr(store, "read_part", read_part_while_another_writer_commits)
    assert store.compact("r", "synthesis") == (2, 2)  # the compacted part and the one committed meanwhile
    monkeypatch.undo()
    assert sorted(store.read("r", "synthesis")["item_id"]) == ["a", "b", "c"]


def _no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The AWS credential chain with nothing in it: no variables, no config or credentials file, no instance role."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _objects(s3_server: dict[str, str], bucket: str) -> dict[str, bytes]:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server["AWS_ENDPOINT_URL"],
        aws_access_key_id=s3_server["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3_server["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def test_an_s3_store_without_credentials_refuses_every_write_before_sending_it(
    s3_bucket: str, s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from ttseval.core.errors import StoreUnwritableError
    from ttseval.core.lease import RunLease

    _no_aws_credentials(monkeypatch, tmp_path)
    store = ArtifactStore(f"s3://{s3_bucket}/runs-here")
    for write in (
        lambda: store.write_bytes("datasets/demo/manifest.json", b'{"name": "demo"}'),
        lambda: RunLease(store, "r").__enter__(),
    ):
        with pytest.raises(StoreUnwritableError, match=r"without S3 credentials.*set AWS_ACCESS_KEY_ID and AWS_SECRET"):
            write()
    assert _objects(s3_server, s3_bucket) == {}


def test_an_unsigned_upload_stores_the_objects_bytes_not_the_sdks_chunk_framing(
    s3_bucket: str, s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """moto (as MinIO) accepts an anonymous PUT; the AWS SDK sent it aws-chunked with a trailing checksum, which the
    server kept as the object. Through the store's filesystem the object is exactly the bytes written."""
    _no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.delenv("AWS_REQUEST_CHECKSUM_CALCULATION", raising=False)
    store = ArtifactStore(f"s3://{s3_bucket}/p")
    with store.fs.open_output_stream(store.path("manifest.json")) as out:  # anonymous: no credentials to sign with
        out.write(b'{"a": 1}')
    assert _objects(s3_server, s3_bucket) == {"p/manifest.json": b'{"a": 1}'}


def test_newest_per_key_is_pandas_stable_sort_and_drop_duplicates() -> None:
    """The Arrow dedupe that reads and compaction use, against the pandas computation it replaced (a stable sort by
    created_at, then drop_duplicates(keep="last")): same rows, same order, on keys with repeats and nulls and
    created_at with ties and nulls."""
    import numpy as np
    import pyarrow as pa

    from ttseval.core.store import newest_per_key

    rng = np.random.default_rng(7)
    n = 2_000
    base = datetime(2026, 1, 1, tzinfo=UTC)
    stamps = [None if rng.random() < 0.05 else base + timedelta(seconds=int(s)) for s in rng.integers(0, 50, n)]
    frame = pd.DataFrame(
        {
            "item_id": [None if rng.random() < 0.02 else f"i{k}" for k in rng.integers(0, 300, n)],
            "system_id": [f"s{k}" for k in rng.integers(0, 3, n)],
            "created_at": pd.Series(stamps, dtype="datetime64[us, UTC]"),
            "value": np.arange(n),
        }
    )
    expected = frame.sort_values("created_at", kind="stable").drop_duplicates(["item_id", "system_id"], keep="last")
    got = newest_per_key(pa.Table.from_pandas(frame, preserve_index=False), ["item_id", "system_id"]).to_pandas()
    assert len(got) < n / 2  # the data had repeats to drop
    assert got["value"].tolist() == expected["value"].tolist()
    without_time = frame.drop(columns="created_at")
    got = newest_per_key(pa.Table.from_pandas(without_time, preserve_index=False), ["item_id", "system_id"])
    assert (
        got["value"].to_pylist()
        == without_time.drop_duplicates(["item_id", "system_id"], keep="last")["value"].tolist()
    )
    # every key once and already in created_at order (a compacted table): the same rows, the table itself uncopied
    unique = expected.sort_values("created_at", kind="stable")
    table = pa.Table.from_pandas(unique, preserve_index=False)
    assert newest_per_key(table, ["item_id", "system_id"]) is table
    shuffled = pa.Table.from_pandas(unique.iloc[::-1], preserve_index=False)  # same keys, out of order: sorted
    got = newest_per_key(shuffled, ["item_id", "system_id"]).to_pandas()
    assert got["value"].tolist() == unique.iloc[::-1].sort_values("created_at", kind="stable")["value"].tolist()
