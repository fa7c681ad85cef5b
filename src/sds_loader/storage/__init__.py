"""Where shards' bytes come from: byte sources for the native core, and nothing else.

`stores` resolves signal_dataset's object stores portably across processes;
`s3_source` and `gcs_source` fetch byte ranges from S3 and GCS for the native
core (`sources` picks the source for a dataset, `native_range` is what both
share), `cache_settings` takes the node cache's settings as a user gives them, and
`remote_readahead` fetches announced ranges in the background. Nothing here
imports the reader's own modules: what reads records sits above this package,
and what reads through signal_dataset instead is `sds_loader.fallback`.
"""
