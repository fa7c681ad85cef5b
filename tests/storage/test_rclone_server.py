"""What tests/support/rclone_server.py says of `rclone serve s3`, checked against the running server.

The S3 tests rely on these answers, and the fixture's docstring lists where
they differ from S3. If an rclone release changes one (honours If-Match,
answers 206), this fails first and says which, so that the docstring and
the tests that route around it (the replaced-object test runs on moto) can
follow.
"""

from __future__ import annotations

import os

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from s3_fixtures import BUCKET


@pytest.fixture
def blob(rclone_server, tmp_path) -> tuple[str, bytes]:
    data = os.urandom(200_000)
    (tmp_path / "blob").write_bytes(data)
    rclone_server.upload_tree(tmp_path, BUCKET, "rclone-behaviour")
    return "rclone-behaviour/blob", data


def status(error: ClientError) -> tuple[int, str]:
    return error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"]


def test_ranged_gets_return_exactly_the_range_with_a_content_range(rclone_server, blob):
    key, data = blob
    client = rclone_server.client()
    answer = client.get_object(Bucket=BUCKET, Key=key, Range="bytes=1000-1999")
    assert answer["Body"].read() == data[1000:2000]
    assert answer["ContentRange"] == f"bytes 1000-1999/{len(data)}"
    # Where S3 answers 206 Partial Content, rclone answers 200.
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    tail = client.get_object(Bucket=BUCKET, Key=key, Range="bytes=-100")
    assert tail["Body"].read() == data[-100:]
    assert tail["ContentRange"] == f"bytes {len(data) - 100}-{len(data) - 1}/{len(data)}"
    cut = client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={len(data) - 10}-{len(data) + 10}")
    assert cut["Body"].read() == data[-10:]
    with pytest.raises(ClientError) as past:
        client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={len(data) + 10}-{len(data) + 20}")
    assert status(past.value) == (416, "InvalidRange")


def test_etags_and_conditions(rclone_server, blob):
    key, data = blob
    client = rclone_server.client()
    etag = client.head_object(Bucket=BUCKET, Key=key)["ETag"]
    assert etag.strip('"') and client.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-9")["ETag"] == etag
    assert (
        client.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-9", IfMatch=etag)["Body"].read() == data[:10]
    )
    # Where S3 answers 412 PreconditionFailed, rclone ignores If-Match.
    other = client.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-9", IfMatch='"0123456789abcdef"')
    assert other["Body"].read() == data[:10]
    with pytest.raises(ClientError) as unchanged:
        client.get_object(Bucket=BUCKET, Key=key, IfNoneMatch=etag)
    assert status(unchanged.value)[0] == 304


def test_missing_keys_and_wrong_secrets_are_refused(rclone_server, blob):
    key, _ = blob
    client = rclone_server.client()
    with pytest.raises(ClientError) as missing:
        client.get_object(Bucket=BUCKET, Key=key + ".missing", Range="bytes=0-9")
    assert status(missing.value) == (404, "NoSuchKey")
    with pytest.raises(ClientError) as head:
        client.head_object(Bucket=BUCKET, Key=key + ".missing")
    assert status(head.value)[0] == 404
    stranger = boto3.client(
        "s3",
        endpoint_url=rclone_server.url,
        region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key="not-the-secret",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    with pytest.raises(ClientError) as refused:
        stranger.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-9")
    assert status(refused.value) == (403, "SignatureDoesNotMatch")
