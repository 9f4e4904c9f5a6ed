"""The change sources: pure models of DynamoDB Streams shards, change records and offsets.

`shards` orders shard lineage, `records` turns a stream record into the one normalized
`ChangeRecord`, `collapse` keeps the final state per key, and `offsets` is the streaming
checkpoint's position per shard. None of these import pyspark or boto3.
"""
