"""Where shards' bytes come from, outside the native core's local files.

`stores` resolves signal_dataset's object stores portably across processes;
`s3_source` fetches byte ranges from S3 for the native core (`sources` picks
the source for a dataset), and `remote_readahead` fetches announced ranges in
the background; `fallback` reads what the native core cannot through
signal_dataset's own reader, in a helper process (`fallback_helper`, which
talks to it by `helper_protocol`).
"""
