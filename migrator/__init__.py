"""dynamodb-migrator: copy a DynamoDB table to DynamoDB or ScyllaDB Alternator with Spark."""

__version__ = "0.1.0"
