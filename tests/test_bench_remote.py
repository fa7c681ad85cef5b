"""`sds-loader bench s3://...` times sparse reads and counts what they fetch."""

from __future__ import annotations

import json

from s3_fixtures import s3_dataset, s3_server  # noqa: F401

from sds_loader.cli import main


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
    result = json.loads((tmp_path / "bench-remote.json").read_text())
    assert result["batch_size"] == 6 and result["requests_in_flight"] == 4
    rows = {
        row["method"].split(",")[0] + (" warm" if "warm" in row["method"] else ""): row
        for row in result["rows"]
    }
    staged, warm = rows["signal_dataset Dataset.__getitems__"], rows["BatchReader warm"]
    # 6 records of 48 in 4 shards: signal_dataset stages whole shards of 12
    # records, the native reader fetches the records (the size per record
    # counts footers in, and records in a cached tail cost nothing: below 1).
    assert staged["x_own_size"] > 3
    assert 0.5 < warm["x_own_size"] <= 2
    assert all(row["records_per_s"] > 0 for row in result["rows"])
    assert warm["requests_per_batch"] <= 6
