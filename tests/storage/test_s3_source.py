"""S3RangeSource against real S3 servers: exact bytes, bounded retries, clear errors.

The server is rclone's, and moto's where S3's own answer to If-Match matters.

Every range is compared with the same bytes of the local copy the test
uploaded. Faults come from a real HTTP proxy in front of the server that
answers 500/503, drops or truncates connections, or stalls, so the retry
path runs over real sockets. Backoff and timeouts are shortened so the
tests stay fast; the bounds they check are the same.
"""

from __future__ import annotations

import multiprocessing
import threading
import time

import numpy as np
import pytest
import signal_dataset as sds
from s3_fixtures import endpoint_options, local_bytes, shard_uris
from s3_server import FaultProxy, free_port
from signal_dataset.storage.backends.s3 import S3Options

from sds_loader.storage import s3_source
from sds_loader.storage.s3_source import HEAD_BYTES, TAIL_BYTES, S3RangeSource


def random_requests(contents: list[bytes], count: int, seed: int):
    """`count` random (file, offset, buffer) ranges, some inside each shard's tail."""
    rng = np.random.default_rng(seed)
    requests = []
    for _ in range(count):
        file = int(rng.integers(len(contents)))
        size = len(contents[file])
        offset = int(rng.integers(size))
        length = int(rng.integers(1, min(size - offset, 20_000) + 1))
        requests.append((file, offset, bytearray(length)))
    return requests


def check(requests, contents) -> None:
    for file, offset, buffer in requests:
        assert bytes(buffer) == contents[file][offset : offset + len(buffer)], (file, offset, len(buffer))


def fast_source(uris, url: str, **overrides) -> S3RangeSource:
    settings = dict(backoff_seconds=0.01, backoff_max_seconds=0.05, connect_timeout=1.0, read_timeout=1.0)
    settings.update(overrides)
    return S3RangeSource(uris, endpoint_options(url), **settings)


@pytest.fixture()
def shards(rclone_dataset):
    uri, local = rclone_dataset
    uris = shard_uris(uri)
    return uris, [local_bytes(u, uri, local) for u in uris]


@pytest.fixture()
def proxy(rclone_server):
    proxy = FaultProxy(rclone_server.port)
    yield proxy
    proxy.close()


def test_sizes_and_ranges_are_exact(rclone_server, shards):
    uris, contents = shards
    source = S3RangeSource(uris, endpoint_options(rclone_server.url), requests_in_flight=8)
    assert [source.size(f) for f in range(len(uris))] == [len(c) for c in contents]
    assert [source.name(f) for f in range(len(uris))] == uris
    requests = random_requests(contents, 60, seed=1)
    source.fetch([(f, o, memoryview(b)) for f, o, b in requests])
    check(requests, contents)
    # Opening a shard costs two GETs (its tail and its first bytes); a range
    # costs one more unless those hold it.
    held = sum(1 for f, o, b in requests if o >= len(contents[f]) - TAIL_BYTES or o + len(b) <= HEAD_BYTES)
    assert all(len(c) > TAIL_BYTES for c in contents)
    assert held < len(requests)
    assert source.counters.requests == 2 * len(uris) + len(requests) - held
    assert source.counters.retries == 0


@pytest.mark.parametrize("fault", [500, 503, "drop", "truncate"])
def test_a_share_of_failed_requests_is_retried(proxy, shards, fault):
    uris, contents = shards
    # Every third request fails, but no request (object and range) fails
    # twice: with requests in flight at once, a counter alone could fail one
    # request's every attempt.
    failed: set[tuple[str, str, object]] = set()

    def plan(n: int, method: str, path: str, byte_range: object = None) -> object:
        if n % 3 != 1 or (method, path, byte_range) in failed:
            return "pass"
        failed.add((method, path, byte_range))
        return fault

    proxy.reset(plan)
    proxy.plan_sees_range = True
    source = fast_source(uris, proxy.url)
    requests = random_requests(contents, 30, seed=2)
    source.fetch([(f, o, memoryview(b)) for f, o, b in requests])
    check(requests, contents)
    injected = sum(1 for *_, action in proxy.seen if action == fault)
    # A shard's first bytes are fetched once beside its tail, as a hint: a
    # failed one is not retried (the read that needs them fetches them).
    heads = sum(1 for *_, byte_range in failed if byte_range == f"bytes=0-{HEAD_BYTES - 1}")
    # Each other injected fault costs one retry; a pooled connection the
    # proxy closed under a fault may cost another. A connection dropped
    # before any answer is sent again by libcurl itself when it was a reused
    # one (the server may have closed it while idle), so not every drop
    # reaches the retry count.
    least = 1 if fault == "drop" else injected - heads
    assert 0 < least <= source.counters.retries <= 2 * injected


@pytest.mark.parametrize("fault", [503, "drop"])
def test_retries_are_bounded_then_name_the_object(proxy, shards, fault):
    uris, _ = shards
    proxy.reset(lambda n, method, path: fault)
    source = fast_source(uris, proxy.url)
    started = time.monotonic()
    with pytest.raises(sds.StorageError, match=rf"{uris[2]}.* failed 5 times") as raised:
        source.fetch([(2, 100, memoryview(bytearray(10))), (1, 0, memoryview(bytearray(10)))])
    assert time.monotonic() - started < 10
    # The last attempt's reason: the store's error code, or what libcurl saw of the connection.
    assert any(word in str(raised.value) for word in ("SlowDown", "Empty reply", "Connection"))
    # Both shards' tails are opened in one round before any range is read:
    # each tail tried max_attempts times, beside one try of each one's head.
    assert len(proxy.seen) <= 2 * (endpoint_options(proxy.url).max_attempts + 1)


def test_a_stalled_answer_times_out_and_is_retried(proxy, shards):
    uris, contents = shards
    proxy.stall_seconds = 2.0
    stalled: list[str] = []

    def plan(n: int, method: str, path: str, byte_range: object = None) -> object:
        if byte_range == "bytes=1000-5999" and not stalled:
            stalled.append(path)
            return "stall"
        return "pass"

    proxy.reset(plan)
    proxy.plan_sees_range = True
    source = fast_source(uris, proxy.url, read_timeout=0.3)
    buffer = bytearray(5000)
    source.size(0)
    source.fetch([(0, 1000, memoryview(buffer))])
    assert bytes(buffer) == contents[0][1000:6000]
    assert stalled and source.counters.retries == 1


def test_a_server_that_stops_and_comes_back(rclone_server, shards):
    uris, contents = shards
    port = free_port()  # nothing listens here yet: connections are refused
    source = fast_source(uris, f"http://127.0.0.1:{port}", backoff_seconds=0.2, backoff_max_seconds=0.4)
    started: list[FaultProxy] = []

    def come_back() -> None:
        deadline = time.monotonic() + 30
        while source.counters.retries < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        started.append(FaultProxy(rclone_server.port, port=port))

    thread = threading.Thread(target=come_back)
    thread.start()
    buffer = bytearray(300)
    try:
        source.fetch([(3, 7, memoryview(buffer))])
    finally:
        thread.join()
        for proxy in started:
            proxy.close()
    assert bytes(buffer) == contents[3][7:307]
    assert source.counters.retries >= 1


def test_missing_object_is_a_clear_error(rclone_server, shards):
    uris, _ = shards
    missing = uris[0].rsplit("/", 1)[0] + "/no-such-shard.arrayrecord"
    source = S3RangeSource([uris[0], missing], endpoint_options(rclone_server.url))
    with pytest.raises(sds.StorageError, match=rf"{missing} does not exist"):
        source.size(1)
    assert source.counters.retries == 0


def test_a_range_past_the_end_is_refused(rclone_server, shards):
    uris, contents = shards
    source = S3RangeSource(uris, endpoint_options(rclone_server.url))
    with pytest.raises(sds.StorageError, match=rf"{uris[1]} holds {len(contents[1])} bytes"):
        source.fetch([(1, len(contents[1]) - 4, memoryview(bytearray(8)))])


def test_a_replaced_object_fails_rather_than_mixing_versions(rclone_server, shards):
    # rclone ignores If-Match (S3 would answer 412): the ETag every answer
    # carries is what tells the reader that the object changed under it.
    uris, contents = shards
    bucket, key = uris[0][len("s3://") :].split("/", 1)
    copy_key = key + ".copy"
    path = rclone_server.path(bucket, copy_key)
    path.write_bytes(contents[0])
    copy_uri = f"s3://{bucket}/{copy_key}"
    source = S3RangeSource([copy_uri], endpoint_options(rclone_server.url))
    deadline = time.monotonic() + 30
    while True:  # until the server's cached listing shows the new object
        try:
            source.size(0)
            break
        except sds.StorageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    path.write_bytes(contents[0][::-1])
    with pytest.raises(sds.StorageError, match=rf"{copy_uri} was replaced"):
        source.fetch([(0, 0, memoryview(bytearray(100)))])


def test_a_store_that_checks_if_match_refuses_a_replaced_object(s3_server, tmp_path):
    # moto, like S3, answers a GET pinned to an old ETag with 412.
    client = s3_server.client()
    client.create_bucket(Bucket="replaced")
    body = bytes(range(256)) * 1024
    client.put_object(Bucket="replaced", Key="shard", Body=body)
    source = S3RangeSource(["s3://replaced/shard"], endpoint_options(s3_server.url))
    buffer = bytearray(100)
    source.fetch([(0, 1000, memoryview(buffer))])
    assert bytes(buffer) == body[1000:1100]
    client.put_object(Bucket="replaced", Key="shard", Body=body[::-1])
    with pytest.raises(sds.StorageError, match=r"s3://replaced/shard was replaced"):
        source.fetch([(0, 2000, memoryview(bytearray(100)))])


def _child_reads(source: S3RangeSource, expected: bytes, queue) -> None:
    buffers = [bytearray(1000) for _ in range(4)]
    source.fetch([(0, 1000 * k, memoryview(b)) for k, b in enumerate(buffers)])
    queue.put(b"".join(buffers) == expected[:4000])


def test_a_forked_child_reads_with_its_own_client(rclone_server, shards):
    uris, contents = shards
    source = S3RangeSource(uris, endpoint_options(rclone_server.url))
    source.fetch([(0, 0, memoryview(bytearray(10))), (1, 0, memoryview(bytearray(10)))])
    parent_native = source.native_source
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_reads, args=(source, contents[0], queue))
    child.start()
    assert queue.get(timeout=60) is True
    child.join(timeout=60)
    assert child.exitcode == 0
    # The parent's source and its connections survived the child untouched.
    assert source.native_source is parent_native
    buffer = bytearray(50)
    source.fetch([(2, 5, memoryview(buffer))])
    assert bytes(buffer) == contents[2][5:55]


def test_close_during_a_read_never_hangs_and_reopens(proxy, shards):
    uris, contents = shards
    proxy.stall_seconds = 1.0
    source = fast_source(uris, proxy.url, read_timeout=5.0)
    for file in range(len(uris)):
        source.size(file)
    proxy.reset(lambda n, method, path: "stall")
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            source.fetch([(f, 0, memoryview(bytearray(100))) for f in range(len(uris))])
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    source.close()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], sds.StorageError)
    proxy.reset()
    buffer = bytearray(100)
    source.fetch([(1, 0, memoryview(buffer)), (2, 0, memoryview(bytearray(1)))])
    assert bytes(buffer) == contents[1][:100]


def test_a_shard_smaller_than_the_tail_read_is_read_whole(rclone_server):
    # S3 answers a suffix range longer than the object with the whole
    # object; rclone answers 416. Either way the shard opens, at no retry.
    body = bytes(range(256)) * 40  # 10 kB, far under TAIL_BYTES
    assert len(body) < TAIL_BYTES
    rclone_server.path("small", "shard").parent.mkdir(parents=True, exist_ok=True)
    rclone_server.path("small", "shard").write_bytes(body)
    source = S3RangeSource(["s3://small/shard"], endpoint_options(rclone_server.url))
    deadline = time.monotonic() + 30
    while True:  # until the server's cached listing shows the new bucket
        try:
            assert source.size(0) == len(body)
            break
        except sds.StorageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    buffer = bytearray(3000)
    source.fetch([(0, 7000, memoryview(buffer))])
    assert bytes(buffer) == body[7000:10000]
    assert source.counters.retries == 0


def test_an_endpoint_from_the_environment_is_the_one_boto3_would_use(rclone_server, shards, monkeypatch):
    # No endpoint in the settings: boto3 takes AWS_ENDPOINT_URL_S3, and so does the native path.
    uris, contents = shards
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", rclone_server.url)
    monkeypatch.setattr(s3_source, "_ENDPOINTS", {})
    monkeypatch.setattr(s3_source, "_SESSIONS", {})
    source = S3RangeSource(uris, S3Options(region_name="us-east-1", addressing_style="path"))
    buffer = bytearray(2000)
    source.fetch([(2, 123, memoryview(buffer))])
    assert bytes(buffer) == contents[2][123:2123]


def test_urls_are_addressed_as_boto3_addresses_them():
    aws = S3Options(region_name="eu-west-1", endpoint_url="https://s3.eu-west-1.amazonaws.com")
    assert s3_source.object_url(aws, "eu-west-1", "bucket", "a b/c+d=1.arrayrecord") == (
        "https://bucket.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd%3D1.arrayrecord"
    )
    # A bucket with dots cannot be a TLS host name; an IP endpoint has no host names.
    assert s3_source.object_url(aws, "eu-west-1", "my.bucket", "k").startswith(
        "https://s3.eu-west-1.amazonaws.com/my.bucket/"
    )
    local = S3Options(endpoint_url="http://127.0.0.1:9000/")
    assert s3_source.object_url(local, "us-east-1", "b", "k") == "http://127.0.0.1:9000/b/k"
    virtual = S3Options(endpoint_url="http://minio.internal:9000", addressing_style="virtual")
    assert s3_source.object_url(virtual, "us-east-1", "b", "x/y") == "http://b.minio.internal:9000/x/y"
