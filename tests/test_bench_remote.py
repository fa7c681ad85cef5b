"""`sds-loader bench s3://...` times sparse reads and counts what they fetch.

Requests and bytes are counted on the wire by the bench's proxy; the tests
check those counts against what is known independently: the shards a batch
touches (signal_dataset stages them whole), and the reader's own counters.
"""

from __future__ import annotations

import json

import boto3
import signal_dataset as sds
from botocore.config import Config
from s3_fixtures import s3_dataset, s3_server  # noqa: F401

from sds_loader.cli import main
from sds_loader.cli.bench.counting_proxy import CountingProxy


def test_bench_reports_rates_and_bytes_per_record(s3_dataset, tmp_path, capsys):
    uri, _ = s3_dataset
    status = main(
        [
            "bench",
            uri,
            "--batch-size",
            "6",
            "--batches",
            "2",
            "--requests-in-flight",
            "4",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "records/s" in out and "fetched/record" in out
    assert "counted by a counting proxy in front of http://127.0.0.1:" in out
    result = json.loads((tmp_path / "bench-remote.json").read_text())
    assert result["batch_size"] == 6 and result["requests_in_flight"] == 4
    rows = {
        row["method"].split(",")[0] + (" warm" if "warm" in row["method"] else ""): row
        for row in result["rows"]
    }
    staged, cold, warm = (
        rows["signal_dataset Dataset.__getitems__"],
        rows["BatchReader"],
        rows["BatchReader warm"],
    )
    # 6 records of 48 in 4 shards of 12: signal_dataset stages every shard a
    # batch touches whole, so it fetches at least a shard's bytes per batch.
    shard_bytes = result["record_bytes"] * 12
    assert staged["requests_per_batch"] is not None and staged["requests_per_batch"] >= 2
    assert staged["bytes_per_record"] * 6 >= shard_bytes
    assert staged["x_own_size"] > 3
    # The warm reader's shard reads are all it sends: the proxy and its own counters agree.
    assert warm["requests_per_batch"] == warm["reader_requests_per_batch"] <= 6
    assert warm["bytes_per_record"] == warm["reader_bytes_per_record"]
    assert 0.5 < warm["x_own_size"] <= 2
    # A cold reader also opens the dataset (control documents), which its own counters leave out.
    assert cold["requests_per_batch"] > cold["reader_requests_per_batch"]
    assert all(row["records_per_s"] > 0 for row in result["rows"])


def test_the_proxy_counts_every_request_and_body_byte(s3_dataset, s3_server):
    uri, _ = s3_dataset
    dataset = sds.open(uri)
    bucket, key = dataset.read_instructions(0, 1)[0].filename.removeprefix("s3://").split("/", 1)
    size = dataset.object_store.info(f"s3://{bucket}/{key}").size
    with CountingProxy(s3_server.url) as proxy:
        client = boto3.client(
            "s3",
            endpoint_url=proxy.url,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        assert len(client.get_object(Bucket=bucket, Key=key, Range="bytes=100-1099")["Body"].read()) == 1000
        assert client.head_object(Bucket=bucket, Key=key)["ContentLength"] == size
        assert len(client.get_object(Bucket=bucket, Key=key)["Body"].read()) == size
        counts = proxy.counts()
    assert counts.requests == 3
    assert counts.body_bytes == 1000 + size
