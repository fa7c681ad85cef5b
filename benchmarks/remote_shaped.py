"""`sds-loader bench s3://...` through a proxy that counts every request and can model a distant store.

    python benchmarks/remote_shaped.py s3://bucket/dataset --endpoint http://127.0.0.1:9000 \
        --latency-ms 20 --bandwidth-mbps 100
    python benchmarks/remote_shaped.py s3://bucket/dataset --endpoint ... --node-cache /tmp/cache

The bench in the package reads through whatever endpoint it is given and
counts what the readers count of themselves. This starts the shaping proxy
(shaping_proxy.py, beside this file) in front of `--endpoint` (default: the
endpoint the store is configured with) and hands it to the same bench as its
`WireCounter`, so that every request and response byte is counted on the
wire, signal_dataset's and the control documents included:

- with `--latency-ms` or `--bandwidth-mbps`, every reader reads through the
  proxy in the timed pass, each answer's first byte held that long and each
  connection paced to that rate, and the proxy counts that pass;
- without, the timed pass goes to the endpoint directly and a second pass
  over the same batches goes through the proxy, which counts it.

Plain http:// endpoints only (the proxy forwards HTTP, it does not terminate TLS).
"""

from __future__ import annotations

import argparse
import os
import sys

from shaping_proxy import BenchProxy

from sds_loader.cli.bench import cache_epochs, remote
from sds_loader.cli.bench.run import results_dir


def configured_endpoint(uri: str) -> str | None:
    """The endpoint the registry's store for `uri` sends its requests to (boto3's from the environment)."""
    from signal_dataset.storage import S3ObjectStore, object_store_for

    store = object_store_for(uri)
    configured = store.options.endpoint_url if isinstance(store, S3ObjectStore) else None
    return configured or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("uri", help="the dataset, s3://bucket/path")
    parser.add_argument(
        "--endpoint", metavar="URL", help="the store's http:// endpoint (default: configured)"
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, metavar="MS", help="first byte held MS")
    parser.add_argument(
        "--bandwidth-mbps", type=float, default=None, metavar="MB_S", help="each connection paced to MB_S"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--requests-in-flight", type=int, default=None)
    parser.add_argument("--inputs", metavar="FIELD", default=None, help="the field to read (default: all)")
    parser.add_argument("--node-cache", metavar="DIR", default=None, help="time epochs through a node cache")
    parser.add_argument("--out", metavar="DIR", default=None, help="where to write the JSON")
    args = parser.parse_args(argv)

    upstream = args.endpoint or configured_endpoint(args.uri)
    if upstream is None or not upstream.startswith("http://"):
        parser.error(
            f"the proxy needs a plain http:// endpoint, and the store's is {upstream or 'AWS (https)'}"
        )
    bandwidth = None if args.bandwidth_mbps is None else args.bandwidth_mbps * 1e6
    out = results_dir(args.out)
    with BenchProxy(upstream, latency_ms=args.latency_ms, bandwidth=bandwidth) as proxy:
        if args.node_cache is not None:
            epochs = cache_epochs.run(
                args.uri,
                cache_dir=args.node_cache,
                batch_size=args.batch_size,
                requests_in_flight=args.requests_in_flight,
                endpoint=upstream,
                counter=proxy,
            )
            print(cache_epochs.text(epochs))
            print(f"\njson: {cache_epochs.write(epochs, out)}")
            return 0
        result = remote.run(
            args.uri,
            batch_size=args.batch_size,
            batches=args.batches,
            requests_in_flight=args.requests_in_flight,
            fields=(args.inputs,) if args.inputs else None,
            endpoint=upstream,
            counter=proxy,
        )
    print(remote.legend(result))
    print()
    print(remote.text(result))
    print(f"\njson: {remote.write(result, out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
