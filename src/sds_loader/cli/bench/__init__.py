"""The measurement code behind `sds-loader bench`.

One module per job: `builtin` writes and caches the built-in dataset, `plan`
fixes the shuffled batches every method reads, `methods` and `bounds` are the
things timed, `timing` times them, `report` renders the table, JSON and chart,
and `run` puts them in order. `remote` times sparse reads from object
storage in seconds, requests and bytes instead.
"""

from sds_loader.cli.bench.run import BenchConfig, BenchResult, run

__all__ = ["BenchConfig", "BenchResult", "run"]
