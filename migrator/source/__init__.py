"""Where items and changes come from: everything that reads the source.

`scan` runs a parallel Scan of a live table; `s3export` reads an S3 export's manifests and data
files, and `stream_source` describes the live table it was taken from; `dynamodb_streams` and
`kinesis` read shard records from DynamoDB Streams and Kinesis Data Streams, and `stream_feeds`
is the picklable description of either one that executors read from. These are the I/O side of
the change sources; the pure models they produce are in `migrator.stream`.
"""
