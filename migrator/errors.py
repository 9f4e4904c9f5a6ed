"""Every error the migrator reports, each built from facts and saying whether a retry can help.

    MigratorError                    (retryable: False unless a leaf says otherwise)
    ├── ConfigError                  a key of the YAML is wrong; names the key path
    ├── UnsupportedFeature           a valid config this version cannot run yet
    ├── AwsError                     an AWS call failed (translated in migrator.aws only)
    │   ├── EndpointUnreachable      retryable: the endpoint did not answer
    │   ├── InvalidCredentials       the endpoint rejected or found no credentials
    │   ├── AccessDenied             the credentials lack a permission
    │   ├── ResourceNotFound         table (or other resource) does not exist
    │   ├── TransientAwsError        retryable: throttling, 5xx
    │   └── AwsRequestFailed         any other rejection (validation, limits)
    ├── SourceError
    │   └── SourceTableNotFound
    ├── TargetError
    │   ├── TargetSchemaMismatch     existing target has other keys
    │   └── WriteFailed              items could not be written after retries
    ├── SavepointError               a savepoint cannot be read, written or honoured
    ├── SegmentFailed                a scan segment failed on an executor (wraps the cause)
    └── CheckpointError              a streaming checkpoint cannot be read or honoured

Errors raised on executors travel back to the driver pickled: `__reduce__` keeps the
class, the message and the attributes whatever the subclass's constructor looks like.
"""

from __future__ import annotations


class MigratorError(Exception):
    """Base of every error the user sees as one line; `retryable` tells retry loops what to do."""

    retryable = False
    exit_code = 1

    def __reduce__(self):
        return (_rebuild, (type(self), str(self), dict(self.__dict__)))


def _rebuild(cls, message, state):
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


def rebuild_error(cls: type, message: str) -> "MigratorError":
    """An error of class `cls` with exactly `message`: for errors that crossed a process as text."""
    return _rebuild(cls, message, {})


class ConfigError(MigratorError):
    """A configuration key is missing, unknown or out of range."""

    exit_code = 2

    def __init__(self, key_path: str, reason: str, source_file: str | None = None):
        self.key_path = key_path
        self.reason = reason
        where = f"{source_file}: " if source_file else ""
        location = f"{key_path}: " if key_path else ""
        super().__init__(f"config error: {where}{location}{reason}")


class UnsupportedFeature(MigratorError):
    """The configuration is valid but asks for something this version does not do yet."""

    exit_code = 2

    def __init__(self, feature: str, key_path: str, fix: str):
        self.feature = feature
        self.key_path = key_path
        super().__init__(f"{key_path}: {feature} is not supported by this version of dynamodb-migrator; {fix}")


class AwsError(MigratorError):
    """An AWS call failed; built only by `migrator.aws.translate_error`."""

    exit_code = 2

    def __init__(self, action: str, resource: str, reason: str, code: str = ""):
        self.action = action
        self.resource = resource
        self.code = code
        super().__init__(f"{action} {resource}: {reason}")


class EndpointUnreachable(AwsError):
    retryable = True


class InvalidCredentials(AwsError):
    pass


class AccessDenied(AwsError):
    pass


class ResourceNotFound(AwsError):
    pass


class TransientAwsError(AwsError):
    retryable = True
    exit_code = 1


class AwsRequestFailed(AwsError):
    exit_code = 1


class SourceError(MigratorError):
    exit_code = 2


class StreamNotEnabled(SourceError):
    def __init__(self, table: str):
        self.table = table
        super().__init__(
            f"source table {table!r} has no stream and source.enableStream is false: enable one "
            "yourself (NEW_AND_OLD_IMAGES avoids a read per change: aws dynamodb update-table "
            f"--table-name {table} --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES), "
            "or set source.enableStream: true to let the migrator enable it"
        )


class SourceTableNotFound(SourceError):
    def __init__(self, table: str, endpoint: str):
        self.table = table
        super().__init__(
            f"source table {table!r} does not exist at {endpoint}: "
            "check source.table, source.region and source.endpoint"
        )


class TargetError(MigratorError):
    exit_code = 2


class TargetSchemaMismatch(TargetError):
    def __init__(self, table: str, expected: str, actual: str):
        self.table = table
        super().__init__(
            f"target table {table!r} exists with key schema {actual}, but the source "
            f"(after renames) has {expected}: nothing was written; drop or rename the "
            "target table, or point target.table at a table with the same keys"
        )


class WriteFailed(TargetError):
    exit_code = 1

    def __init__(self, table: str, unwritten: int, attempts: int):
        self.table = table
        self.unwritten = unwritten
        super().__init__(
            f"writing to {table!r}: {unwritten} items still unprocessed after {attempts} "
            "attempts; lower target.throughputWritePercent or raise the table's write capacity, "
            "then rerun to resume"
        )


class SavepointError(MigratorError):
    exit_code = 2


class SegmentFailed(MigratorError):
    """A scan segment failed; says which, and why, from intent to cause."""

    exit_code = 1

    def __init__(self, segment: int, total: int, cause: str, retryable: bool):
        self.segment = segment
        self.retryable = retryable
        super().__init__(f"copying scan segment {segment} of {total}: {cause}")


class CheckpointError(MigratorError):
    """The streaming checkpoint cannot be read or honoured; says what happened and the way out."""

    exit_code = 2

    def __init__(self, reason: str, location: str | None = None):
        self.reason = reason
        self.location = location
        where = f"checkpoint {location}: " if location else "checkpoint: "
        super().__init__(
            f"{where}{reason}; stopped rather than skip changes. Two ways out: set "
            "invalidCheckpointBehavior: restart (the checkpoint is dropped, the table copied again "
            "and replication goes on from there), or delete the checkpoint directory and the "
            "savepoint yourself and run again"
        )
