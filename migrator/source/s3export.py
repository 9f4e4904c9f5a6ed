"""The S3 side of an export import: read its manifests, check its data files are there, download one.

The driver reads the two manifests and lists the data files before anything is written, so
a wrong bucket or key, a damaged manifest or a missing file stops the job with exit code 2.
Executors download one data file each (`download`). Parsing and decoding are Spark- and
boto3-free, in `migrator.export`; this module only moves bytes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, Callable, Sequence

from migrator.aws import translated
from migrator.errors import AccessDenied, ResourceNotFound
from migrator.export.errors import ExportIncomplete, ExportNotFound
from migrator.export.manifest import DataFile, ExportLayout, ExportSummary, check_item_counts, parse_data_files, parse_summary

log = logging.getLogger(__name__)

DOWNLOAD_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ExportManifests:
    """What an export holds: its summary and its data files, each keyed where it is read from."""

    summary: ExportSummary
    files_key: str
    files: tuple[DataFile, ...]


def read_manifests(client: Any, bucket: str, summary_key: str, where: str) -> ExportManifests:
    """Read and check manifest-summary.json and manifest-files.json; `where` names the endpoint in errors."""
    return manifests_read_by(lambda key: _read_object(client, bucket, key, where), summary_key)


def manifests_read_by(read: Callable[[str], bytes], summary_key: str) -> ExportManifests:
    """Both manifests, each file's bytes got by `read(key)`: from S3, or from a local folder the
    migrator wrote an export to (its manifests name files by their path under the folder)."""
    summary = parse_summary(read(summary_key), summary_key)
    layout = ExportLayout.of(summary_key, summary)
    files_key = layout.locate(summary.manifest_files_s3_key)
    files = parse_data_files(read(files_key), files_key)
    check_item_counts(summary, files, files_key)
    located = tuple(replace(f, data_file_s3_key=layout.locate(f.data_file_s3_key)) for f in files)
    return ExportManifests(summary=summary, files_key=files_key, files=located)


def check_files_present(client: Any, bucket: str, files: Sequence[DataFile]) -> None:
    """Refuse an export whose data files are not all in the bucket, before anything is written.

    One ListObjectsV2 page per 1,000 keys under the files' common folder. Without the
    s3:ListBucket permission the check is skipped with a warning: a missing file then stops
    the import when its turn comes (exit code 1, the file named).
    """
    if not files:
        return
    keys = [f.data_file_s3_key for f in files]
    prefix = _folder(os.path.commonprefix(keys))
    present: set[str] = set()
    try:
        with translated("listing the data files of the export in", f"s3://{bucket}/{prefix}"):
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                present.update(entry["Key"] for entry in page.get("Contents", []))
    except AccessDenied as exc:
        log.warning("%s: cannot check that every data file is there before importing; going on", exc)
        return
    missing = [key for key in keys if key not in present]
    if missing:
        raise ExportIncomplete(bucket, missing, len(keys))


def download(client: Any, bucket: str, key: str, destination: BinaryIO) -> None:
    """Copy one object into `destination`; raises ResourceNotFound when it does not exist."""
    with translated("reading", f"export data file s3://{bucket}/{key}"):
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        for chunk in body.iter_chunks(DOWNLOAD_CHUNK_BYTES):
            destination.write(chunk)


def _read_object(client: Any, bucket: str, key: str, where: str) -> bytes:
    try:
        with translated("reading", f"s3://{bucket}/{key}"):
            return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ResourceNotFound as exc:
        reason = f"bucket {bucket!r} does not exist" if exc.code == "NoSuchBucket" else "no such object"
        raise ExportNotFound(bucket, key, reason, where) from None


def _folder(key: str) -> str:
    """The folder part of a key, with its trailing slash ("" for none)."""
    head, slash, _ = key.rpartition("/")
    return head + slash
