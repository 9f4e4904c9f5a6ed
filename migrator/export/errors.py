"""The errors a DynamoDB S3 export raises when one of its files is not what DynamoDB wrote.

    MigratorError (migrator.errors)
    └── ExportError
        ├── ExportManifestError   manifest-summary.json or manifest-files.json is unusable;
        │                         found before anything is written (exit code 2)
        └── ExportFileError       a data file is missing, truncated, corrupt or disagrees
                                  with the manifest; found while copying (exit code 1)

Both name the file's S3 key and the reason, and neither is retryable: reading the same
bytes again gives the same answer. They pickle back from executors like every MigratorError.
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
