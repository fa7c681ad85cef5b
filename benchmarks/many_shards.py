"""Many shards: `python benchmarks/many_shards.py ROOT --shards 100000` (sds_loader.cli.bench.many_shards)."""

from sds_loader.cli.bench.many_shards import main

if __name__ == "__main__":
    raise SystemExit(main())
