"""The errors a DynamoDB S3 export raises when one of its files is not what DynamoDB wrote.

    MigratorError (migrator.errors)
    └── ExportError
        ├── ExportNotFound        the bucket or manifest-summary.json does not exist (exit code 2)
        ├── ExportManifestError   manifest-summary.json or manifest-files.json is unusable;
        │                         found before anything is written (exit code 2)
        ├── ExportIncomplete      data files the manifest lists are not in the bucket;
        │                         found before anything is written (exit code 2)
        ├── ExportFileError       a data file is missing, truncated, corrupt or disagrees
        │                         with the manifest; found while copying (exit code 1)
        └── ImportFileFailed      importing a data file failed for another reason (a write,
                                  the network); retryable when its cause is (exit code 1)

Each names the file's S3 key and the reason. The first four are not retryable: reading the
same bytes again gives the same answer. They pickle back from executors like every MigratorError.
"""

from __future__ import annotations

from migrator.errors import MigratorError


class ExportError(MigratorError):
    """A file of a DynamoDB S3 export cannot be used as it is."""

    def __init__(self, file_key: str, reason: str, message: str):
        self.file_key = file_key
        self.reason = reason
        super().__init__(message)


class ExportManifestError(ExportError):
    """A manifest is not valid JSON, lacks a field, or contradicts itself."""

    exit_code = 2

    def __init__(self, file_key: str, reason: str):
        super().__init__(
            file_key,
            reason,
            f"export manifest {file_key}: {reason}; point the job at the manifest-summary.json "
            "that DynamoDB wrote (<prefix>/AWSDynamoDB/<export id>/manifest-summary.json) and "
            "leave the export's files as they are",
        )


class ExportFileError(ExportError):
    """A data file is missing, truncated, corrupt, or holds other items than its manifest line says."""

    exit_code = 1

    def __init__(self, file_key: str, reason: str):
        super().__init__(
            file_key,
            reason,
            f"export data file {file_key}: {reason}; the import stopped rather than skip it: the "
            "object must be byte for byte the one the export wrote (its manifest line gives the "
            "MD5 and item count); if it is damaged or gone in S3, run a new export",
        )


class ExportNotFound(ExportError):
    """The export's summary cannot be read because the bucket or the object does not exist."""

    exit_code = 2

    def __init__(self, bucket: str, file_key: str, reason: str, where: str):
        self.bucket = bucket
        super().__init__(
            file_key,
            reason,
            f"export manifest s3://{bucket}/{file_key}: {reason} at {where}; check source.bucket, "
            "source.manifestKey (the key of manifest-summary.json), source.region and source.endpoint",
        )


class ExportIncomplete(ExportError):
    """Data files that manifest-files.json lists are not in the bucket."""

    exit_code = 2

    def __init__(self, bucket: str, missing: list[str], listed: int):
        self.bucket = bucket
        self.missing = missing
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        super().__init__(
            missing[0],
            f"{len(missing)} of {listed} data files missing",
            f"export in s3://{bucket}: {len(missing)} of the {listed} data files its manifest lists are "
            f"not in the bucket ({shown}); nothing was written: the files must stay where the export "
            "wrote them (or, for a copied export, beside the manifest-summary.json you point at); "
            "if they are gone, run a new export",
        )


class ImportFileFailed(ExportError):
    """Importing one data file failed for a reason outside the file (a write, the network)."""

    exit_code = 1

    def __init__(self, file_key: str, number: int, total: int, cause: str, retryable: bool):
        self.number = number
        self.retryable = retryable
        super().__init__(file_key, cause, f"importing export data file {file_key} ({number} of {total}): {cause}")
