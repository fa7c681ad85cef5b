"""`sds-loader bench s3://...` times sparse reads and counts what they fetch.

Against `rclone serve s3` on 127.0.0.1. The installed bench counts what the
readers count of themselves (`stats`); through benchmarks/remote_shaped.py
requests and bytes are also counted on the wire by the shaping proxy
(benchmarks/shaping_proxy.py); the tests check those counts against what
is known independently: the shards a batch touches (signal_dataset stages
them whole), and the reader's own counters. The proxy is checked for
what it promises (the first byte held for the latency, bodies paced to the
bandwidth, every request and body byte counted): behaviour of the proxy, not
the speed of a reader.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from types import SimpleNamespace

import boto3
import pytest
import signal_dataset as sds
from botocore.config import Config
from remote_shaped import main as shaped_main
from s3_fixtures import BUCKET
from sds_factory import read_chunks
from shaping_proxy import BenchProxy

from sds_loader.cli import main
from sds_loader.cli.bench.remote import _cpu_per_request_outside_decoding


def test_bench_reads_through_the_endpoint_given_and_reports_the_readers_own_counts(
    rclone_dataset, rclone_server, tmp_path, capsys, monkeypatch
):
    uri, _ = rclone_dataset
    # Without --out, results go to a new dated folder under bench-results/.
    monkeypatch.chdir(tmp_path)
    # Through a proxy the bench does not know of: every reader reads through --endpoint.
    with BenchProxy(rclone_server.url) as proxy:
        status = main(
            ["bench", uri, "--endpoint", proxy.url, "--batch-size", "6", "--batches", "2"]
            + ["--requests-in-flight", "4"]
        )
        seen = proxy.counts()
    out = capsys.readouterr().out
    assert status == 0
    assert "records/s" in out and "fetched/record" in out
    assert "not counted on the wire" in out and "benchmarks/remote_shaped.py" in out
    [written] = (tmp_path / "bench-results").glob("*/bench-remote.json")
    assert f"json: {os.path.relpath(written, tmp_path)}" in out or f"json: {written}" in out
    result = json.loads(written.read_text())
    assert result["batch_size"] == 6 and result["requests_in_flight"] == 4
    rows = _rows(result)
    staged, cold, warm = rows["signal_dataset"], rows["cold"], rows["warm"]
    assert all(row["requests_per_batch"] is None for row in result["rows"])
    assert staged["reader_requests_per_batch"] is None and "not counted" in staged["note"]
    # The readers' own counts: a warm reader reads each record's chunk, no more than a batch's worth.
    assert 1 <= warm["reader_requests_per_batch"] <= 6
    assert 0.5 < warm["x_own_size"] <= 2
    assert cold["reader_requests_per_batch"] >= warm["reader_requests_per_batch"]
    assert "the reader's own count" in warm["note"]
    # Every pass went through the endpoint given: signal_dataset's whole shards among them.
    assert seen.body_bytes >= 2 * 6 * result["record_bytes"] * 12 / 6


def _rows(result: dict) -> dict[str, dict]:
    """The batch rows by method: signal_dataset, cold, warm."""
    by_name = {row["method"]: row for row in result["rows"]}
    return {
        "signal_dataset": by_name["signal_dataset Dataset.__getitems__"],
        "cold": by_name["BatchReader, cold (new reader per batch)"],
        "warm": by_name["BatchReader, warm (footers cached)"],
    }


def test_the_proxy_script_counts_a_second_pass_on_the_wire(rclone_dataset, rclone_server, tmp_path, capsys):
    uri, _ = rclone_dataset
    argv = [uri, "--endpoint", rclone_server.url, "--batch-size", "6", "--batches", "2"]
    status = shaped_main(argv + ["--requests-in-flight", "4", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "counted by the proxy at http://127.0.0.1:" in out and "on a second pass" in out
    result = json.loads((tmp_path / "bench-remote.json").read_text())
    assert result["latency_ms"] is None and result["bandwidth_bytes_per_s"] is None
    rows = _rows(result)
    staged, cold, warm = rows["signal_dataset"], rows["cold"], rows["warm"]
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


def test_the_proxy_counts_every_request_and_body_byte(rclone_dataset, rclone_server):
    uri, _ = rclone_dataset
    dataset = sds.open(uri)
    bucket, key = dataset.read_instructions(0, 1)[0].filename.removeprefix("s3://").split("/", 1)
    size = dataset.object_store.info(f"s3://{bucket}/{key}").size
    with BenchProxy(rclone_server.url) as proxy:
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


def test_a_shaped_run_reads_every_method_through_the_proxy_and_counts_it(
    rclone_dataset, rclone_server, tmp_path, capsys
):
    """--latency-ms/--bandwidth-mbps: all rows read through the shaping proxy, which counts them."""
    # The ShardAwareSampler row, a torch Sampler.
    import torch_required  # noqa: F401 - skips this test without torch

    uri, local = rclone_dataset
    status = shaped_main(
        [uri, "--endpoint", rclone_server.url, "--batch-size", "6", "--batches", "2"]
        + ["--requests-in-flight", "4", "--latency-ms", "30", "--bandwidth-mbps", "200"]
        + ["--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "shaping proxy: 30 ms to first byte, 200 MB/s per connection" in out
    assert "ShardAwareSampler / shuffled" in out and "BatchReader / signal_dataset" in out
    result = json.loads((tmp_path / "bench-remote.json").read_text())
    assert result["latency_ms"] == 30 and result["bandwidth_bytes_per_s"] == 200e6
    assert result["counted_by"].startswith("the proxy at http://127.0.0.1:")
    rows = {row["method"]: row for row in result["rows"]}
    staged = rows["signal_dataset Dataset.__getitems__"]
    cold = rows["BatchReader, cold (new reader per batch)"]
    warm = rows["BatchReader, warm (footers cached)"]
    shard_bytes = result["record_bytes"] * 12
    # Counted in the timed pass itself: signal_dataset still stages whole shards.
    assert staged["requests_per_batch"] >= 2 and staged["bytes_per_record"] * 6 >= shard_bytes
    # The proxy sees at least what the readers count of themselves; the warm reader sends nothing else.
    assert cold["requests_per_batch"] > cold["reader_requests_per_batch"]
    assert warm["requests_per_batch"] == warm["reader_requests_per_batch"] >= 1
    assert warm["bytes_per_record"] == warm["reader_bytes_per_record"]
    # Every batch waits for at least one answer, held 30 ms by the proxy.
    assert all(row["batch_seconds"] >= 0.030 for row in result["rows"])
    assert warm["cpu_seconds_per_request"] > 0
    # What the requests cost beyond decoding is the process's CPU time less
    # the decoding stages' wall time: on a pass of two batches a thread
    # descheduled mid-stage can make it nothing, and then it is not reported
    # (test_cpu_per_request_leaves_out_decoding checks the arithmetic).
    fetch_cpu = result["fetch_cpu_seconds_per_request"]
    assert fetch_cpu is None or fetch_cpu > 0
    assert ("CPU per request outside decoding" in out) == (fetch_cpu is not None)
    stretch = {row["order"]: row for row in result["stretch_rows"]}
    assert set(stretch) == {"ShardAwareSampler, will_need", "shuffled"}
    for row in stretch.values():
        assert row["records"] == 48  # the whole dataset: it holds fewer than 1,024
        assert row["requests"] >= row["reader_requests"] >= 1
        assert row["bytes_per_record"] >= row["reader_bytes_per_record"]
        # Every record is read once, so its chunks cross the wire: all but those
        # the reader already holds from opening the shards (their first bytes).
        assert row["bytes_per_record"] * 48 >= 0.75 * _record_chunk_bytes(local)
        assert row["seconds"] >= 0.030 and row["cpu_seconds_per_request"] > 0
    assert result["ratios"]["stretch: ShardAwareSampler / shuffled, records/s"] > 0
    assert result["ratios"]["warm reader: BatchReader / signal_dataset (opened per batch), bytes"] < 1


def _record_chunk_bytes(local: str) -> int:
    """The stored bytes of every record chunk of the local copy's shards (no footers)."""
    dataset = sds.open(local)
    shards = dict.fromkeys(i.filename for i in dataset.read_instructions(0, len(dataset)))
    total = 0
    for shard in shards:
        chunks = [chunk for chunk in read_chunks(shard.removeprefix("file://")) if chunk.chunk_type == "r"]
        total += sum(chunk.end - chunk.begin for chunk in chunks[:-2])  # the last two: the footer index
    return total


def test_the_installed_bench_refuses_shaping_and_names_the_script(rclone_dataset, tmp_path, capsys):
    uri, _ = rclone_dataset
    for argv in (["bench", uri, "--latency-ms", "20"], ["bench", str(tmp_path), "--bandwidth-mbps", "5"]):
        assert main(argv) == 2
        assert "python benchmarks/remote_shaped.py" in capsys.readouterr().err
    assert main(["bench", str(tmp_path), "--endpoint", "http://127.0.0.1:1"]) == 2
    assert "a local one has none" in capsys.readouterr().err


def _signed_get(url: str, bucket: str, key: str, headers: dict[str, str] | None = None):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="GET", url=f"{url}/{bucket}/{key}", headers=headers or {})
    credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    return dict(request.headers.items())


@pytest.fixture
def megabyte(rclone_server, tmp_path) -> tuple[str, bytes]:
    """The key of a 1 MB object (random bytes) in the rclone bucket, and its bytes."""
    data = os.urandom(1_000_000)
    (tmp_path / "megabyte").write_bytes(data)
    rclone_server.upload_tree(tmp_path, BUCKET, "shaping")
    return "shaping/megabyte", data


def _timed_get(proxy_url: str, key: str, headers: dict[str, str] | None = None) -> tuple[float, int, bytes]:
    port = int(proxy_url.rsplit(":", 1)[1])
    signed = _signed_get(proxy_url, BUCKET, key, headers)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.connect()
        started = time.perf_counter()
        connection.request("GET", f"/{BUCKET}/{key}", headers=signed)
        response = connection.getresponse()
        body = response.read()
        return time.perf_counter() - started, response.status, body
    finally:
        connection.close()


def test_the_shaping_proxy_holds_the_first_byte_for_the_latency(rclone_server, megabyte):
    key, data = megabyte
    with BenchProxy(rclone_server.url, latency_ms=50) as proxy:
        seconds, status, body = _timed_get(proxy.url, key, {"Range": "bytes=100-1099"})
        counts = proxy.counts()
    assert status in (200, 206) and body == data[100:1100]
    assert seconds >= 0.050
    assert (counts.requests, counts.body_bytes) == (1, 1000)


def test_the_shaping_proxy_paces_a_body_to_the_bandwidth(rclone_server, megabyte):
    key, data = megabyte
    with BenchProxy(rclone_server.url, bandwidth=10e6) as proxy:
        seconds, status, body = _timed_get(proxy.url, key)
        counts = proxy.counts()
    assert status == 200 and body == data
    assert seconds >= 0.099  # 1 MB at 10 MB/s
    assert (counts.requests, counts.body_bytes) == (1, len(data))


def test_the_shaping_proxy_serves_a_client_like_a_store(rclone_server, rclone_dataset):
    """boto3 through the proxy, on kept-alive connections from several threads: listings,
    HEADs, ranged and whole GETs come back intact, each counted once with its body."""
    uri, local = rclone_dataset
    dataset = sds.open(uri)
    bucket, key = dataset.read_instructions(0, 1)[0].filename.removeprefix("s3://").split("/", 1)
    with open(os.path.join(local, key.split("/", 1)[1]), "rb") as handle:
        contents = handle.read()
    with BenchProxy(rclone_server.url, latency_ms=5, bandwidth=500e6) as proxy:
        client = boto3.client(
            "s3",
            endpoint_url=proxy.url,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        listed = client.list_objects_v2(Bucket=bucket, Prefix=key.rsplit("/", 1)[0] + "/")
        assert key in [entry["Key"] for entry in listed["Contents"]]
        assert client.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(contents)
        problems: list[str] = []

        def ranges(seed: int) -> None:
            for k in range(5):
                start = (seed * 7919 + k * 104729) % (len(contents) - 5000)
                got = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + 4999}")[
                    "Body"
                ].read()
                if got != contents[start : start + 5000]:
                    problems.append(f"bytes {start}-{start + 4999} differ")

        threads = [threading.Thread(target=ranges, args=(seed,)) for seed in range(4)]
        before = proxy.counts()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        after = proxy.counts()
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == contents
        final = proxy.counts()
    assert not problems, problems
    assert (after.requests - before.requests, after.body_bytes - before.body_bytes) == (20, 20 * 5000)
    assert (final.requests - after.requests, final.body_bytes - after.body_bytes) == (1, len(contents))
    assert before.requests == 2  # the listing and the HEAD


def test_cpu_per_request_leaves_out_decoding():
    """The process's CPU time less the decoding stages, per request; nothing when none is left."""

    def warm(requests: int, **stages: float) -> SimpleNamespace:
        seconds = {"plan": 0.5, "wait": 0.5, "hash": 0.0, "decompress": 0.0, "parse": 0.0, "copy": 0.0}
        return SimpleNamespace(fetch_requests=requests, stage_seconds={**seconds, **stages})

    # plan and wait are not decoding: only hash, decompress, parse and copy come off.
    decoding = warm(6, hash=0.1, decompress=0.2, parse=0.05, copy=0.05)
    assert _cpu_per_request_outside_decoding(1.0, decoding) == pytest.approx(0.1)
    assert _cpu_per_request_outside_decoding(1.0, warm(0, decompress=0.2)) is None
    assert _cpu_per_request_outside_decoding(0.3, warm(6, decompress=0.3)) is None
