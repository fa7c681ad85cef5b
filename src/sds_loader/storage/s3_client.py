"""Where a boto3 client sends its requests, and who it signs them as.

A dataset opened with `object_store=S3ObjectStore(client)` is read from the
store that client talks to, with the client's own credentials: the user may
have given it an endpoint, keys or a session that the environment knows
nothing of. The native source sends its ranged GETs to the same place under
the same identity, so both come from the client, never from the
environment's chain beside it. A client built by signal_dataset from
`S3Options` answers the same questions the same way, so every S3 store goes
through here.

botocore keeps a client's credentials in its request signer; that attribute
is private, and the only way to sign as the client signs without sending
requests through it. A client that does not look like a botocore client (a
wrapper, a fake) gives None, and the dataset is read by signal_dataset,
through that client, instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClientIdentity:
    """The endpoint, region, addressing style and credentials of one boto3 client."""

    endpoint_url: str
    region: str
    #: "path", "virtual" or "auto", as the client's configuration says.
    addressing_style: str
    #: botocore's credentials object (refreshable when the chain's), or None: unsigned requests.
    credentials: Any

    def __repr__(self) -> str:
        # Never the credentials: a repr ends up in logs.
        return (
            f"ClientIdentity(endpoint_url={self.endpoint_url!r}, region={self.region!r}, "
            f"addressing_style={self.addressing_style!r})"
        )


def identity_of(client: object) -> ClientIdentity | None:
    """What `client` says about where it sends requests and as whom, or None if it is no boto3 client."""
    meta = getattr(client, "meta", None)
    signer = getattr(client, "_request_signer", None)
    endpoint = getattr(meta, "endpoint_url", None)
    if not isinstance(endpoint, str) or not endpoint or signer is None:
        return None
    region = getattr(meta, "region_name", None) or "us-east-1"
    config = getattr(meta, "config", None)
    s3_config = getattr(config, "s3", None) or {}
    style = s3_config.get("addressing_style") if isinstance(s3_config, dict) else None
    return ClientIdentity(
        endpoint_url=endpoint,
        region=str(region),
        addressing_style=str(style or "auto"),
        credentials=getattr(signer, "_credentials", None),
    )


def access_key_of(credentials: Any) -> str | None:
    """The access key id of botocore `credentials` (frozen, so refreshed if about to expire), or None."""
    if credentials is None:
        return None
    return str(credentials.get_frozen_credentials().access_key)


def twin_client(client: object, identity: ClientIdentity) -> Any:
    """A new boto3 client with `client`'s endpoint, region, configuration and current credentials.

    For a forked child: the original's pooled connections are its parent's,
    and two processes writing requests into one connection read each other's
    answers. The twin signs with the credentials as they are now (botocore
    gives no public way to share a refreshable credentials object between
    clients).
    """
    import boto3

    keys: dict[str, Any] = {}
    if identity.credentials is not None:
        frozen = identity.credentials.get_frozen_credentials()
        keys = {
            "aws_access_key_id": frozen.access_key,
            "aws_secret_access_key": frozen.secret_key,
            "aws_session_token": frozen.token,
        }
    config = getattr(getattr(client, "meta", None), "config", None)
    return boto3.session.Session().client(
        "s3", endpoint_url=identity.endpoint_url, region_name=identity.region, config=config, **keys
    )
