"""Credentials for the native S3 path come from boto3's chain, and fresh ones reach requests.

Against `rclone serve s3`, which checks every request's SigV4 signature: a
profile whose `credential_process` hands out a wrong secret is refused with
a StorageError that names the credentials; once the process hands out the
right ones (as a rotating role's do), the same source reads exactly, without
being reopened, after its next look at the chain.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap

import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401
from rclone_server import KEY, SECRET
from s3_fixtures import endpoint_options, local_bytes, shard_uris

from sds_loader.storage import native_range, s3_source
from sds_loader.storage.s3_source import S3RangeSource


@pytest.fixture()
def rotating_profile(tmp_path, monkeypatch):
    """A profile whose credentials come from a process that prints what `keys.json` holds."""
    keys = tmp_path / "keys.json"
    script = tmp_path / "hand_out.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import datetime, json
            keys = json.load(open({str(keys)!r}))
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
            keys.update(Version=1, Expiration=expires.isoformat())
            print(json.dumps(keys))
            """
        )
    )
    config = tmp_path / "config"
    name = f"rotating-{tmp_path.name}"
    config.write_text(
        f"[profile {name}]\ncredential_process = {sys.executable} {script}\nregion = us-east-1\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))

    def hand_out(secret: str) -> None:
        keys.write_text(json.dumps({"AccessKeyId": KEY, "SecretAccessKey": secret}))

    return name, hand_out


def test_credentials_are_taken_from_the_chain_again_before_a_read(
    rclone_server, rclone_dataset, rotating_profile, monkeypatch
):
    uri, local = rclone_dataset
    uris = shard_uris(uri)
    profile, hand_out = rotating_profile
    options = dataclasses.replace(endpoint_options(rclone_server.url), profile_name=profile)
    hand_out("not-the-secret")
    source = S3RangeSource(uris, options, backoff_seconds=0.01, backoff_max_seconds=0.02)
    with pytest.raises(sds.StorageError, match=r"refused to read .*check the credentials"):
        source.size(0)
    # The role rotates its secret; the chain's next answer is the right one.
    hand_out(SECRET)
    monkeypatch.setattr(native_range, "CREDENTIALS_CHECK_SECONDS", 0.0)
    source._next_check = 0.0  # the minute between looks at the chain has passed
    buffer = bytearray(1000)
    source.fetch([(1, 500, memoryview(buffer))])
    assert bytes(buffer) == local_bytes(uris[1], uri, local)[500:1500]
    assert source.counters.retries == 0


def test_without_credentials_requests_go_unsigned_and_are_refused(
    rclone_server, rclone_dataset, tmp_path, monkeypatch
):
    uri, _ = rclone_dataset
    uris = shard_uris(uri)
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(s3_source, "_SESSIONS", {})
    source = S3RangeSource(uris, endpoint_options(rclone_server.url))
    with pytest.raises(sds.StorageError, match=r"refused to read .*no credentials were found.*unsigned"):
        source.size(0)
