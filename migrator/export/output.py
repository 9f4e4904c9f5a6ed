"""What writing a DynamoDB S3 export produces: its layout, its data files' bytes, its two manifests.

The inverse of `manifest` and `decode`: an export written here is one this project's importer,
and AWS's ImportTable (InputFormat DYNAMODB_JSON, gzip), read back. The layout and fields are
AWS's ("DynamoDB table export output format",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):

    AWSDynamoDB/<export id>/_started                 empty, written first
    AWSDynamoDB/<export id>/data/<name>.json.gz      gzip, one {"Item": {...}} line per item
    AWSDynamoDB/<export id>/manifest-files.json      a JSON line per data file
    AWSDynamoDB/<export id>/manifest-summary.json    written last: its presence marks a finished export

under the folder the export is written to. Two things differ from AWS's own exports:
the summary carries `tableCreationParameters` (AWS's summaries do not record the table's
keys; this is ImportTable's parameter of that name: TableName, KeySchema, the key attributes'
AttributeDefinitions, BillingMode and, for PROVISIONED, ProvisionedThroughput), and no
`.checksum` files are written (AWS lists them but does not document their content).

Pure: no boto3, no pyspark. Items arrive in wire form (`migrator.wire`: numbers as the
service's strings, binary as base64 text), which is DynamoDB JSON as exports hold it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO, Iterable, Mapping

from migrator.export.manifest import DYNAMODB_JSON, FULL_EXPORT, TABLE_CREATION_FIELD, DataFile
from migrator.items import Item

EXPORTS_FOLDER = "AWSDynamoDB/"
STARTED_FILE_NAME = "_started"
SUMMARY_VERSION = "2020-06-30"  # the version full exports' summaries carry
GZIP_LEVEL = 6  # zlib's default: level 9 costs about twice the CPU for a few percent smaller files


def new_export_id(now: datetime, random_hex: str | None = None) -> str:
    """An id shaped like AWS's, `01714557600000-abcdef12`: epoch milliseconds, then 8 random hex digits.

    Unique per run, so two exports to one folder never share a directory.
    """
    millis = int(now.timestamp() * 1000)
    return f"{millis:014d}-{random_hex or secrets.token_hex(4)}"


def export_folder(export_id: str) -> str:
    """The export's folder, relative to where exports are written: `AWSDynamoDB/<export id>/`."""
    return f"{EXPORTS_FOLDER}{export_id}/"


def data_file_name(segment: int, piece: int = 0) -> str:
    """The data file of one scan segment, relative to the export's folder.

    Fixed per segment, so a segment retried after a failure replaces its file, never adds one.
    Where a segment is split into files of bounded size (a Hadoop folder: `export_pieces`), its
    second file is `segment-000003-000001.json.gz`, and so on.
    """
    return f"data/segment-{segment:06d}{f'-{piece:06d}' if piece else ''}.json.gz"


def iso_time(moment: datetime) -> str:
    """`2020-11-04T07:28:34.028Z`, as summaries write times."""
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


class DataFileEncoder:
    """Writes items to `destination` as a gzip DYNAMODB_JSON data file, counting items and hashing the bytes.

    `destination` needs only `write(bytes)`. After `close()`, `item_count`, `size_bytes` and
    `md5_base64()` describe the compressed file exactly as its manifest line must. As a context
    manager it closes when the block succeeds and writes nothing more when it fails.
    """

    def __init__(self, destination: BinaryIO):
        self._hashing = _HashingWriter(destination)
        self._gzip = gzip.GzipFile(fileobj=self._hashing, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)
        self.item_count = 0

    def write_items(self, items: Iterable[Item]) -> None:
        """One `{"Item": ...}` line per item, in one write."""
        lines = [json.dumps({"Item": item}, ensure_ascii=False, separators=(",", ":")) for item in items]
        if lines:
            self._gzip.write(("\n".join(lines) + "\n").encode("utf-8"))
            self.item_count += len(lines)

    def close(self) -> None:
        self._gzip.close()  # writes gzip's trailer; the destination stays open

    def __enter__(self) -> "DataFileEncoder":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None:
            self._hashing.detach()  # the file is abandoned: gzip's trailer must not reach the destination
        self.close()

    @property
    def size_bytes(self) -> int:
        return self._hashing.size_bytes

    def md5_base64(self) -> str:
        """The MD5 of the compressed bytes, base64, as manifest-files.json's md5Checksum."""
        return base64.b64encode(self._hashing.md5.digest()).decode("ascii")


class _HashingWriter:
    """Passes bytes on to a destination, keeping their MD5 and count."""

    def __init__(self, destination: BinaryIO):
        self._destination = destination
        self.md5 = hashlib.md5()
        self.size_bytes = 0

    def write(self, data: bytes) -> int:
        if self._destination is not None:
            self.md5.update(data)
            self.size_bytes += len(data)
            self._destination.write(data)
        return len(data)

    def detach(self) -> None:
        """Drop whatever comes next."""
        self._destination = None

    def flush(self) -> None:  # GzipFile flushes its file object on close
        pass


def files_manifest(data_files: Iterable[DataFile]) -> bytes:
    """manifest-files.json: one JSON line per data file, with AWS's fields in AWS's order."""
    lines = [
        json.dumps({"itemCount": f.item_count, "md5Checksum": f.md5_checksum, "etag": f.etag,
                    "dataFileS3Key": f.data_file_s3_key})  # fmt: skip
        for f in data_files
    ]
    return "".join(line + "\n" for line in lines).encode("utf-8")


@dataclass(frozen=True)
class ExportFacts:
    """What a finished export's summary says, gathered by the driver."""

    export_id: str
    table_arn: str
    table_id: str | None
    s3_bucket: str | None  # None for a local folder
    s3_prefix: str | None
    manifest_files_key: str  # as the manifests name it
    start_time: datetime
    end_time: datetime
    item_count: int
    billed_size_bytes: int
    table_creation: Mapping[str, Any]  # tableCreationParameters


def summary_document(facts: ExportFacts) -> bytes:
    """manifest-summary.json: AWS's fields in AWS's order, then tableCreationParameters.

    exportTime is the moment the Scan began: a Scan is not a point-in-time snapshot, so an item
    changed while the export ran may appear in either state.
    """
    document = {
        "version": SUMMARY_VERSION,
        "exportArn": f"{facts.table_arn}/export/{facts.export_id}",
        "startTime": iso_time(facts.start_time),
        "endTime": iso_time(facts.end_time),
        "tableArn": facts.table_arn,
        "tableId": facts.table_id,
        "exportTime": iso_time(facts.start_time),
        "s3Bucket": facts.s3_bucket,
        "s3Prefix": facts.s3_prefix,
        "s3SseAlgorithm": None,  # the bucket's default encryption applies; the writer does not know it
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": facts.manifest_files_key,
        "billedSizeBytes": facts.billed_size_bytes,
        "itemCount": facts.item_count,
        "outputFormat": DYNAMODB_JSON,
        "exportType": FULL_EXPORT,
        TABLE_CREATION_FIELD: dict(facts.table_creation),
    }
    return (json.dumps(document, indent=3, ensure_ascii=False) + "\n").encode("utf-8")


def table_creation_parameters(
    table: str,
    key_schema: Iterable[tuple[str, str]],
    attribute_types: Mapping[str, str],
    billing_mode: str,
    read_capacity: int = 0,
    write_capacity: int = 0,
) -> dict[str, Any]:
    """ImportTable's TableCreationParameters for the table's primary key: key attributes only."""
    keys = list(key_schema)
    parameters: dict[str, Any] = {
        "TableName": table,
        "AttributeDefinitions": [{"AttributeName": name, "AttributeType": attribute_types[name]} for name, _ in keys],
        "KeySchema": [{"AttributeName": name, "KeyType": kind} for name, kind in keys],
        "BillingMode": billing_mode,
    }
    if billing_mode == "PROVISIONED":
        parameters["ProvisionedThroughput"] = {
            "ReadCapacityUnits": max(1, read_capacity), "WriteCapacityUnits": max(1, write_capacity),
        }  # fmt: skip
    return parameters

