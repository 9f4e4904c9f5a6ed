"""The replication: the source's changes replayed onto the target until the operator stops it.

`query` runs the Structured Streaming query over DynamoDB Streams or Kinesis Data Streams and
applies each micro-batch; `checkpoint` is its streaming checkpoint folder; `replay_start` and
`kinesis_start` fix and check where replay starts; `chaining` replays an S3 export's
successor changes (a later incremental export, then the stream) after an import.
"""
