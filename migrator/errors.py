"""Every error the migrator reports, each built from facts and saying whether a retry can help.

    MigratorError                    (retryable: False unless a leaf says otherwise)
    ├── ConfigError                  a key of the YAML is wrong; names the key path
    ├── StartupFailed                the job could not start (an OSError, Spark's launch); nothing was written
    │   └── PortUnavailable          a port the config names is taken (or not ours to open)
    │       ├── MetricsPortUnavailable   metricsPort
    │       └── ProgressPortUnavailable  progressPort
    ├── UnsupportedFeature           a valid config this version cannot run yet
    ├── AwsError                     an AWS call failed (translated in migrator.aws only)
    │   ├── EndpointUnreachable      retryable: the endpoint did not answer
    │   ├── InvalidCredentials       the endpoint rejected or found no credentials
    │   ├── AccessDenied             the credentials lack a permission
    │   ├── ResourceNotFound         table (or other resource) does not exist
    │   ├── TransientAwsError        retryable: throttling, 5xx
    │   ├── Throttled                throttled with no progress for throttlingGiveUpMinutes (migrator.throttling)
    │   └── AwsRequestFailed         any other rejection (validation, limits)
    ├── SourceError
    │   ├── SourceTableNotFound
    │   └── StreamGap                the live table's stream cannot replay every change since an export
    ├── TargetError
    │   ├── TargetSchemaMismatch     existing target has other keys
    │   ├── SameTable                the target is the source table itself
    │   ├── TargetTableNotFound      validating a target table that does not exist
    │   ├── ExportPathError          target.path cannot take an S3 export (found before writing)
    │   │   └── ExportExists         target.path already holds an export, finished or not
    │   ├── ExportUnfinished         writing an S3 export failed part way; says what to delete
    │   ├── DeltaTargetError         target.path cannot take this Delta table (found before writing)
    │   └── DeltaWriteFailed         retryable: delta-rs could not read, write or commit (storage, a conflict)
    ├── ReportUnwritable             the validation report's path cannot be written
    ├── ValidationFailed             a validation could not finish (exit 3: neither equal nor different)
    ├── SavepointError               a savepoint cannot be read, written or honoured
    │   ├── RecordedTargetMissing    units recorded as copied, but the target table is gone
    │   └── RecordedTargetReplaced   units recorded as copied into another table of the target's name
    ├── SegmentFailed                a scan segment failed on an executor (wraps the cause)
    │   └── SegmentExportFailed      ... while being written as an export's data file
    ├── RenameCollision              an item has both a rename's `from` and its `to` attribute
    └── CheckpointError              a streaming checkpoint cannot be read or honoured

Errors raised on executors travel back to the driver pickled: `__reduce__` keeps the
class, the message and the attributes whatever the subclass's constructor looks like.
"""

from __future__ import annotations

import errno


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


class StartupFailed(MigratorError):
    """The job could not start, before anything was written: a local resource or Spark's launch failed."""

    exit_code = 2

    def __init__(self, doing: str, cause: str, ways_out: str):
        self.doing = doing
        super().__init__(f"{doing}: {cause}; nothing was written. {ways_out}")


def describe_os_error(exc: OSError) -> str:
    """An OSError as `reason (file)`, without Python's `[Errno N]` prefix."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason} ({exc.filename})" if exc.filename else reason


class PortUnavailable(StartupFailed):
    """A port the config names cannot be listened on: another process holds it, or this user may not open it."""

    def __init__(self, key: str, port: int, exc: OSError, on: str, ways_out: str):
        self.port = port
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            cause = "another process (a second migrator, or any other server) listens on it"
            doing = f"{key} {port}{on} is already in use"
        else:
            cause = describe_os_error(exc)
            doing = f"{key} {port}{on} cannot be opened"
        super().__init__(doing, cause, f"Ways out: {ways_out}")


class MetricsPortUnavailable(PortUnavailable):
    """metricsPort cannot be listened on."""

    def __init__(self, port: int, exc: OSError, host: str = "0.0.0.0"):
        super().__init__(
            "metricsPort", port, exc, "" if host == "0.0.0.0" else f" on metricsHost {host}",
            f"set metricsPort to a free port; stop what listens on {port} (ss -ltnp 'sport = :{port}' names it); "
            "set metricsHost to an address of this machine; or remove metricsPort to run without the "
            "Prometheus endpoint",
        )  # fmt: skip


class ProgressPortUnavailable(PortUnavailable):
    """progressPort, where running tasks report their counts, cannot be listened on."""

    def __init__(self, port: int, exc: OSError, host: str):
        super().__init__(
            "progressPort", port, exc, f" on {host} (spark.driver.bindAddress)",
            f"set progressPort to a free port the executors may reach; stop what listens on {port} "
            f"(ss -ltnp 'sport = :{port}' names it); or remove progressPort to listen on an ephemeral port",
        )  # fmt: skip


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


class Throttled(AwsError):
    """Throttled for the side's whole give-up time without one request getting through (see migrator.throttling).

    Not retryable: the time to wait was given in the config and has passed.
    """

    exit_code = 1

    def __init__(self, action: str, resource: str, code: str, give_up_minutes: float, side: str):
        self.side = side
        percent = "throughputReadPercent" if side == "source" else "throughputWritePercent"
        super().__init__(
            action,
            resource,
            f"throttled ({code}) for {give_up_minutes:g} minutes without a single request getting through; "
            f"raise the table's capacity (or switch it to on-demand), lower {side}.{percent}, or give it "
            f"longer with {side}.throttlingGiveUpMinutes, then rerun to resume",
            code,
        )


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


class StreamGap(SourceError):
    """Chaining an S3 export with the live table's stream: the stream cannot replay every change since the export.

    Built by `migrator.replicate.chaining`, which says why (`reason`) and what was written so far
    (`outcome`); the ways out are the same for every reason.
    """

    def __init__(self, reason: str, outcome: str = "Nothing was written"):
        self.reason = reason
        super().__init__(
            f"{reason}. {outcome}. Ways out: take a new export of the table while its stream is "
            "enabled (the stream must be older than the export) and import it within 18 hours of the export; or copy the "
            "live table instead of importing an export (source type: dynamodb with target.streamChanges: "
            "true); or set source.acceptStreamGap: true to import the export and replicate what the stream "
            "holds, losing the changes made in that gap"
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


class ExportPathError(TargetError):
    """target.path cannot take an S3 export: found before anything is written."""

    def __init__(self, where: str, reason: str):
        self.where = where
        super().__init__(f"target.path {where}: {reason}")


class ExportExists(ExportPathError):
    """target.path already holds an export (finished or not): never written over."""

    def __init__(self, where: str, folders: list[str], finished: bool):
        self.folders = folders
        shown = ", ".join(folders[:3]) + (f" and {len(folders) - 3} more" if len(folders) > 3 else "")
        state = "an export" if finished else "an unfinished export (a run that stopped before its manifest-summary.json)"
        super().__init__(
            where,
            f"already holds {state} ({shown}); nothing was written: an export is never written over. "
            f"Set target.path to another folder, or delete {folders[0]} if it is no longer needed",
        )


class ExportUnfinished(TargetError):
    """Writing an S3 export failed part way: the folder holds data files but no manifest-summary.json."""

    exit_code = 1

    def __init__(self, folder: str, cause: str):
        self.folder = folder
        super().__init__(
            f"writing the S3 export {folder}: {cause}; the export is unfinished (no manifest-summary.json): "
            f"delete {folder} and run again"
        )


class DeltaTargetError(TargetError):
    """target.path cannot take the Delta table: another table's layout, a folder of other files, an unusable key."""

    def __init__(self, where: str, reason: str):
        self.where = where
        super().__init__(f"target.path {where}: {reason}")


class DeltaWriteFailed(TargetError):
    """delta-rs could not read, write or commit the table (storage trouble, a commit conflict). Retryable: every
    commit carries an application transaction, so writing again never applies anything twice."""

    retryable = True
    exit_code = 1

    def __init__(self, doing: str, cause: Exception, then: str = ""):
        self.doing = doing
        reason = f"{doing} failed ({type(cause).__name__}: {str(cause)[:300]})"
        super().__init__(f"{reason}; {then}" if then else reason)


class SameTable(TargetError):
    """Source and target name one table: a copy onto itself, and its replication would loop."""

    def __init__(self, table: str, where: str):
        self.table = table
        super().__init__(
            f"source and target are the same table ({table!r} at {where}): copying a table onto itself changes "
            "nothing it should, and replicating its changes into itself would never end; nothing was written. "
            "Point target.table at another table, or target.region / target.endpoint at another place"
        )


class TargetTableNotFound(TargetError):
    """The validator's target table does not exist: there is nothing to compare the source with."""

    def __init__(self, table: str, endpoint: str):
        self.table = table
        super().__init__(
            f"target table {table!r} does not exist at {endpoint}: nothing was compared; "
            "check target.table, target.region and target.endpoint, or run the migration first"
        )


class ReportUnwritable(MigratorError):
    """The path given to --report cannot take the validation report."""

    exit_code = 2

    def __init__(self, path: str, reason: str):
        self.path = path
        super().__init__(f"cannot write the validation report to {path}: {reason}; pass --report a writable file path")


class SummaryUnwritable(MigratorError):
    """The path given to --summary-json cannot take the run's summary."""

    exit_code = 2

    def __init__(self, path: str, reason: str):
        self.path = path
        super().__init__(f"cannot write the summary to {path}: {reason}; pass --summary-json a writable file path")


class ValidationFailed(MigratorError):
    """The validation could not finish (a scan or a repair failed): its answer is neither "equal" (exit 0)
    nor "differences remain" (exit 1), so it exits 3."""

    exit_code = 3

    def __init__(self, source: str, target: str, cause: str):
        self.source = source
        self.target = target
        super().__init__(f"validating {source!r} against {target!r} failed: {cause}; fix the cause and run it again")


class SavepointError(MigratorError):
    exit_code = 2


class RecordedTargetMissing(SavepointError):
    """A savepoint records copied units, but the target table they went into does not exist."""

    def __init__(self, count: int, units: str, savepoint: str, table: str):
        self.table = table
        super().__init__(
            f"savepoint {savepoint} records {_counted(count, units)} as copied into target table {table!r}, which "
            "does not exist: skipping them would leave it incomplete; nothing was written. Ways out: delete the savepoint "
            "to copy everything again; or point target.table (target.region, target.endpoint) at the table they "
            "were copied into"
        )


class RecordedTargetReplaced(SavepointError):
    """A savepoint records copied units, but the target table of that name is not the one they went into."""

    def __init__(self, count: int, units: str, savepoint: str, table: str, how: str):
        self.table = table
        super().__init__(
            f"savepoint {savepoint} records {_counted(count, units)} as copied into another table than target "
            f"{table!r} is now ({how}): it was dropped and recreated since, and may lack those rows; nothing was "
            "written. Ways out: delete the savepoint to copy everything into this table; or point target.table "
            "(target.region, target.endpoint) at the table they were copied into"
        )


def _counted(count: int, units: str) -> str:
    """`3 segments`, `1 segment`: `units` is the plural."""
    return f"{count} {units[:-1] if count == 1 else units}"


class SegmentFailed(MigratorError):
    """A scan segment of a table copy failed; says which, and why, from intent to cause."""

    exit_code = 1
    intent = "copying"

    def __init__(self, segment: int, total: int, cause: str, retryable: bool):
        self.segment = segment
        self.retryable = retryable
        super().__init__(f"{self.intent} scan segment {segment} of {total}: {cause}")


class SegmentExportFailed(SegmentFailed):
    """A scan segment being written as an export's data file failed."""

    intent = "exporting"


class RenameCollision(MigratorError):
    """An item has both a rename's `from` attribute and its `to`: renamed, one value would silently replace the other."""

    exit_code = 1

    def __init__(self, key: str, from_name: str, to_name: str):
        self.key = key
        self.from_name = from_name
        self.to_name = to_name
        super().__init__(
            f"item {key} has both attribute {from_name!r} and attribute {to_name!r}, and renames maps "
            f"{from_name!r} to {to_name!r}: the renamed item would keep only one of the two values, so it was not "
            f"written and the run stopped. Ways out: rename {from_name!r} to a name no item uses; drop that rename; "
            f"or, for a snapshot or an import (a stream replays the change as it was), remove {to_name!r} or "
            f"{from_name!r} from that item in the source. Then rerun: what was copied so far is kept"
        )


class CheckpointError(MigratorError):
    """The streaming checkpoint cannot be read or honoured; says what happened and the way out."""

    exit_code = 2

    def __init__(self, reason: str, location: str | None = None, ways_out: str | None = None):
        self.reason = reason
        self.location = location
        where = f"checkpoint {location}: " if location else "checkpoint: "
        ways_out = ways_out or (
            "Two ways out: set invalidCheckpointBehavior: restart (the checkpoint is dropped, the table "
            "copied again and replication goes on from there), or delete the checkpoint directory and "
            "the savepoint yourself and run again"
        )
        super().__init__(f"{where}{reason}; {STOPPED_RATHER_THAN_SKIP}. {ways_out}")


STOPPED_RATHER_THAN_SKIP = "stopped rather than skip changes"
