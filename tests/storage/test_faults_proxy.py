"""The fault proxy injects what it says it does, where and when it says, and counts it.

Raw HTTP through tests/support/fault_proxy.py to fake-gcs-server (which
needs no signature, so a test can ask for any range itself): each kind of
fault as a client meets it, on the part of a shard it was aimed at, on the
schedule it was given, and the counts and log that the fault tests assert
with.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from urllib.parse import quote

import pytest
from fault_proxy import Fault, FaultProxy, error_document, every, first, once_per_byte, rate
from gcs_fixtures import BUCKET, NAME
from sds_factory import data_shards

BLOCK = 1 << 16


@pytest.fixture
def shard(gcs_server, gcs_dataset):
    """(proxy, media path of data shard 0, its bytes as the store holds them)."""
    _, local = gcs_dataset
    path = data_shards(local)[0]
    key = f"{NAME}/{os.path.relpath(path, local)}"
    proxy = FaultProxy(gcs_server.port, served=gcs_server.data)
    try:
        with open(path, "rb") as stored:
            yield proxy, f"/download/storage/v1/b/{BUCKET}/o/{quote(key, safe='')}?alt=media", stored.read()
    finally:
        proxy.close()


def get(proxy: FaultProxy, path: str, first_byte: int, last: int, timeout: float = 10.0):
    """(status, headers, body) of a ranged GET through `proxy`."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Range": f"bytes={first_byte}-{last}"})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_a_flip_changes_one_byte_a_reader_checks_in_each_part(shard):
    proxy, path, data = shard
    proxy.inject(Fault("flip"))
    size = len(data)
    tail_start = size - 2 * BLOCK
    for first_byte, last, changed in [
        (0, 63, 32),  # the head: the signature chunk's header
        (tail_start, size - 1, (size - 1) // BLOCK * BLOCK + 24 + 8),  # the tail: the postscript's header
        (1000, 2999, 2000),  # a body: its middle
    ]:
        status, _, body = get(proxy, path, first_byte, last)
        assert status == 206
        expected = data[first_byte : last + 1]
        differs = [k + first_byte for k in range(len(body)) if body[k] != expected[k]]
        assert differs == [changed]
    assert proxy.injected_at == {("flip", "head"): 1, ("flip", "tail"): 1, ("flip", "body"): 1}


def test_wrong_ranges_are_what_a_confused_server_sends(shard):
    proxy, path, data = shard
    proxy.inject(Fault("whole", parts=("body",)))
    status, headers, body = get(proxy, path, 100, 199)
    assert (status, body, "content-range" in headers) == (200, data, False)
    proxy.inject(Fault("other_range"))
    status, headers, body = get(proxy, path, 100, 199)
    assert (status, headers["content-range"], body) == (206, f"bytes 101-200/{len(data)}", data[101:201])


def test_cut_answers_end_short_or_reset(shard):
    proxy, path, _ = shard
    proxy.inject(Fault("short"))
    with pytest.raises(http.client.IncompleteRead) as short:
        get(proxy, path, 0, 9999)
    assert len(short.value.partial) == 5000
    proxy.inject(Fault("reset"))
    with pytest.raises(ConnectionResetError):
        get(proxy, path, 0, 9999)
    proxy.inject(Fault("stall"))
    proxy.stall_seconds = 5
    with pytest.raises(socket.timeout):
        get(proxy, path, 0, 9999, timeout=0.3)


def test_error_answers_carry_the_stores_own_document(shard):
    proxy, path, _ = shard
    proxy.inject(Fault("status", status=503))
    status, headers, body = get(proxy, path, 0, 99)
    assert status == 503 and headers["content-type"].startswith("application/json")
    assert json.loads(body)["error"]["errors"][0]["reason"] == "backendError"
    content_type, xml = error_document("/datasets/captures/objects/data/x", 503)
    assert content_type == "application/xml" and b"<Code>SlowDown</Code>" in xml


def test_schedules_pick_the_same_gets_whatever_the_order(shard):
    proxy, path, _ = shard
    proxy.inject(Fault("status", first(2), parts=("body",)))
    assert [get(proxy, path, 100, 199)[0] for _ in range(3)] == [503, 503, 206]
    proxy.inject(Fault("flip", once_per_byte(), parts=("body",)))
    for first_byte in (100, 150, 300):
        get(proxy, path, first_byte, first_byte + 99)
    # 150-249 holds bytes of the flipped 100-199: it passes.
    assert [kind for *_, kind in proxy.log] == ["flip", None, "flip"]
    picked = []
    for order in ((500, 100, 300, 200, 400), (400, 200, 300, 100, 500)):
        proxy.inject(Fault(("status", "flip"), rate(0.5, seed=3, per_range=9)))
        for first_byte in order * 2:
            get(proxy, path, first_byte, first_byte + 9)
        picked.append(sorted((sent, kind or "") for _, sent, _, kind in proxy.log))
    assert picked[0] == picked[1] and 0 < proxy.injected.total() < 10
    proxy.inject(Fault("status", every(), where="no-such-object"))
    assert get(proxy, path, 0, 9)[0] == 206 and proxy.gets.total() == 1
