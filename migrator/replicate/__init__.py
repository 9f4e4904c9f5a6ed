"""The replication: the source's changes replayed onto the target until the operator stops it.

The changes come from the live table's DynamoDB stream or from the Kinesis data stream it
streams to. `datasource` is the Spark data source that reads their shard records as rows;
`apply` is what each micro-batch does to the target (collapse per key, look up, put or
delete, paced); `query` starts and runs the Structured Streaming query on the driver, stops
it and sums it up. `checkpoint` is the query's streaming checkpoint folder; `replay_start`
and `kinesis_start` fix and check where replay starts; `chaining` checks, for a run that
imports an S3 export and then replicates, that the live table's stream still holds every
change made since the export, and opens that stream. Nothing here imports `migrator.run`,
`migrator.cli` or `migrator.snapshot`: they call into replication, never the other way.
"""
