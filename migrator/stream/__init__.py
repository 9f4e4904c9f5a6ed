"""The pure models of change streams, shared by DynamoDB Streams and Kinesis Data Streams.

`shards` orders shard lineage, `reading` says how far one shard read got, `records` and
`kinesis_records` turn a stream record into the one normalized `ChangeRecord`, `collapse` keeps
the final state per key, `key_state` remembers the newest change per key across batches, and
`offsets` is the streaming checkpoint's position per shard. None of these import pyspark or boto3
(a unit test checks it); the reads themselves (AWS calls) are in `migrator.source`.
"""
