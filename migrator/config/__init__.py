"""The YAML configuration: parsed into typed, validated, secret-safe objects before any AWS call.

The format is ScyllaDB Migrator's DynamoDB configuration (camelCase keys, `type: dynamodb`,
`dynamo` or `alternator`), so an existing ScyllaDB Migrator YAML loads unchanged. Keys that
format accepts but that have no effect here are accepted with a one-line warning
(`scylla_compat.COMPAT_ONLY_KEYS`); keys neither format knows are errors with a did-you-mean.
Every error names the key path. camelCase exists only here: fields are snake_case.

Each module imports only those listed before it:

- `base`: the model every block extends, and the error a rule across blocks raises to name its key
- `connections`: endpoint, region, credentials (assumeRole too) and Alternator's pool settings
- `kinesis`: `target.streamChanges` and its Kinesis block
- `tables`: the source and target blocks that name a DynamoDB or Alternator table
- `exports`: the source and target blocks of DynamoDB S3 exports
- `delta`: the Delta Lake target block and its typed columns
- `segments`: sets of scan segments as skipSegments and copiedSegments write them (numbers, ranges)
- `savepoints`: where savepoints are kept, and the record a savepoint carries
- `document`: `MigratorConfig` with its rules across blocks, and `LoadedConfig`
- `scylla_compat`: ScyllaDB Migrator's keys that are accepted and ignored
- `messages`: pydantic's errors as one line naming the key
- `loading`: `load_config` and `parse_config`, and what is checked on the YAML before the models

Outside the package it imports only pydantic, PyYAML, `migrator.errors`, `migrator.redact` and
`migrator.connection`: never pyspark or boto3, so a bad config is reported without waiting for them.
"""

from migrator.config.connections import Credentials, Endpoint
from migrator.config.delta import DeltaTarget
from migrator.config.document import LoadedConfig, MigratorConfig
from migrator.config.exports import S3ExportSource, S3ExportTarget
from migrator.config.kinesis import KinesisStreamChanges
from migrator.config.loading import load_config, parse_config
from migrator.config.savepoints import Savepoints
from migrator.config.tables import DynamoSource, DynamoTarget

__all__ = [
    "Credentials",
    "DeltaTarget",
    "DynamoSource",
    "DynamoTarget",
    "Endpoint",
    "KinesisStreamChanges",
    "LoadedConfig",
    "MigratorConfig",
    "S3ExportSource",
    "S3ExportTarget",
    "Savepoints",
    "load_config",
    "parse_config",
]
