"""The two manifests of a DynamoDB S3 export: what was exported, and which data files hold it.

An export writes, under `<prefix>/AWSDynamoDB/<export id>/` ("DynamoDB table export output
format", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):

- `manifest-summary.json`, one JSON object: the export's ARN, the table's ARN, times,
  `outputFormat` (DYNAMODB_JSON or ION), `itemCount`, and `manifestFilesS3Key`, the key of
  the files manifest. Incremental exports add `exportType: INCREMENTAL_EXPORT`,
  `exportFromTime` and `exportToTime` (the window, start inclusive, end exclusive) and
  `outputView`, and carry no `exportTime`; full exports carry `exportTime`, the instant the
  data reflects, and older ones no `exportType`. An import does not need the time: a full
  export's summary without `exportTime` is accepted, and `reflects_time` falls back to
  `startTime` (as ScyllaDB Migrator does when chaining a stream after an export), else None.
- `manifest-files.json`, JSON lines, one per data file: `dataFileS3Key`, `itemCount`,
  `md5Checksum` (the base64 of the object's binary MD5 digest, like S3's Content-MD5) and
  `etag` (S3's ETag, which is not an MD5 for multipart or KMS-encrypted objects, so it is
  kept but not checked).

Exports written by this project (`migrator.export.output`) add `tableCreationParameters` to the
summary: ImportTable's parameter of that name, giving the table's primary key and billing,
which AWS's summaries do not record. `described_table` holds it in DescribeTable's shape.

Both manifests name files by their full key in the bucket the export wrote to. `ExportLayout`
finds them where the summary actually is, so an export copied to another prefix or bucket
(with `aws s3 sync`, say) is read from its copy.

Parsing checks what the rest of the import relies on and names the field when it is wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from migrator.export.errors import ExportManifestError

FULL_EXPORT = "FULL_EXPORT"
INCREMENTAL_EXPORT = "INCREMENTAL_EXPORT"
EXPORT_TYPES = (FULL_EXPORT, INCREMENTAL_EXPORT)

DYNAMODB_JSON = "DYNAMODB_JSON"
ION = "ION"
OUTPUT_FORMATS = (DYNAMODB_JSON, ION)

SUMMARY_FILE_NAME = "manifest-summary.json"
FILES_MANIFEST_NAME = "manifest-files.json"

MD5_DIGEST_BYTES = 16
TABLE_CREATION_FIELD = "tableCreationParameters"
_KEY_TYPES = {"S", "N", "B"}
BILLING_MODES = ("PROVISIONED", "PAY_PER_REQUEST")

# "2020-11-04T07:28:34.028Z" as the summaries write it; any fraction length and offset accepted.
_ISO_TIME = re.compile(
    r"(?P<seconds>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d{1,9}))?(?P<zone>Z|[+-]\d{2}:\d{2})"
)


@dataclass(frozen=True)
class ExportSummary:
    """manifest-summary.json: what was exported, in which format, and where the file list is."""

    export_arn: str
    table_arn: str
    export_type: str
    output_format: str
    item_count: int
    manifest_files_s3_key: str
    export_time: datetime | None = None
    export_from_time: datetime | None = None
    export_to_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    output_view: str | None = None
    s3_bucket: str | None = None
    s3_prefix: str | None = None
    billed_size_bytes: int | None = None
    table_id: str | None = None
    version: str | None = None
    # From tableCreationParameters (exports this project writes): KeySchema, AttributeDefinitions,
    # BillingModeSummary and ProvisionedThroughput, as DescribeTable shows a table. None when absent.
    described_table: Mapping[str, Any] | None = field(default=None, hash=False)

    @property
    def is_incremental(self) -> bool:
        return self.export_type == INCREMENTAL_EXPORT

    @property
    def reflects_time(self) -> datetime | None:
        """The instant the table's state in this export is as of (for an incremental export, just before it).

        A full export without exportTime (very old summaries) falls back to startTime, the
        moment the export began; None when the summary has neither.
        """
        if self.is_incremental:
            return self.export_to_time
        return self.export_time or self.start_time


@dataclass(frozen=True)
class DataFile:
    """One line of manifest-files.json: a data file's key, and what its content must match."""

    data_file_s3_key: str
    item_count: int
    md5_checksum: str | None = None
    etag: str | None = None


def parse_summary(text: str | bytes, file_key: str = SUMMARY_FILE_NAME) -> ExportSummary:
    """manifest-summary.json's text to an ExportSummary; `file_key` names the file in errors."""
    document = _json_object(text, file_key, where="the file")
    export_type = _optional_string(document, "exportType", file_key) or FULL_EXPORT
    if export_type not in EXPORT_TYPES:
        raise ExportManifestError(file_key, f"exportType {export_type!r} is not one of {', '.join(EXPORT_TYPES)}")
    output_format = _required_string(document, "outputFormat", file_key)
    if output_format not in OUTPUT_FORMATS:
        raise ExportManifestError(
            file_key, f"outputFormat {output_format!r} is not one DynamoDB exports write ({', '.join(OUTPUT_FORMATS)})"
        )
    summary = ExportSummary(
        export_arn=_required_string(document, "exportArn", file_key),
        table_arn=_required_string(document, "tableArn", file_key),
        export_type=export_type,
        output_format=output_format,
        item_count=_count(document, "itemCount", file_key, "the file"),
        manifest_files_s3_key=_required_string(document, "manifestFilesS3Key", file_key),
        export_time=_optional_time(document, "exportTime", file_key),
        export_from_time=_optional_time(document, "exportFromTime", file_key),
        export_to_time=_optional_time(document, "exportToTime", file_key),
        start_time=_optional_time(document, "startTime", file_key),
        end_time=_optional_time(document, "endTime", file_key),
        output_view=_optional_string(document, "outputView", file_key),
        s3_bucket=_optional_string(document, "s3Bucket", file_key),
        s3_prefix=_optional_string(document, "s3Prefix", file_key),
        billed_size_bytes=_optional_count(document, "billedSizeBytes", file_key),
        table_id=_optional_string(document, "tableId", file_key),
        version=_optional_string(document, "version", file_key),
        described_table=_described_table(document.get(TABLE_CREATION_FIELD), file_key),
    )
    _check_times(summary, file_key)
    return summary


def parse_data_files(text: str | bytes, file_key: str = FILES_MANIFEST_NAME) -> list[DataFile]:
    """manifest-files.json's JSON lines to DataFiles, in the manifest's order; blank lines are skipped."""
    if isinstance(text, bytes):
        text = _utf8(text, file_key)
    files: list[DataFile] = []
    seen_keys: set[str] = set()
    # Only "\n" ends a line (JSON lines); str.splitlines would also split on U+2028 and the like.
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        data_file = _data_file(line, file_key, f"line {line_number}")
        if data_file.data_file_s3_key in seen_keys:
            raise ExportManifestError(
                file_key, f"line {line_number}: data file {data_file.data_file_s3_key} is listed twice"
            )
        seen_keys.add(data_file.data_file_s3_key)
        files.append(data_file)
    return files


def check_item_counts(summary: ExportSummary, files: Iterable[DataFile], file_key: str = FILES_MANIFEST_NAME) -> None:
    """Refuse a files manifest whose item counts do not add up to the summary's itemCount.

    A shortfall means the files manifest is not the complete list the export wrote.
    """
    listed = sum(data_file.item_count for data_file in files)
    if listed != summary.item_count:
        raise ExportManifestError(
            file_key,
            f"its data files hold {listed} items in all, but the summary of export {summary.export_arn} "
            f"says {summary.item_count}: the files manifest is incomplete or belongs to another export",
        )


@dataclass(frozen=True)
class ExportLayout:
    """Where an export's files are: the keys its manifests name, moved to the folder the summary is in.

    An export writes everything under one folder, `<prefix>/AWSDynamoDB/<export id>/`, and its
    manifests name files by their full key there. When the summary was read from another folder
    (the export was copied elsewhere), every key under the folder the manifests name is read
    from the same place under the summary's folder; keys outside it are read as written.
    """

    summary_key: str
    written_folder: str  # the folder the manifests name, from manifestFilesS3Key

    @classmethod
    def of(cls, summary_key: str, summary: ExportSummary) -> "ExportLayout":
        return cls(summary_key, _folder(summary.manifest_files_s3_key))

    @property
    def folder(self) -> str:
        return _folder(self.summary_key)

    def locate(self, key: str) -> str:
        """The key to read for a key the manifests name."""
        if self.written_folder and key.startswith(self.written_folder):
            return self.folder + key[len(self.written_folder):]
        return key


def _folder(key: str) -> str:
    """"a/b/c.json" → "a/b/"; a key without a folder → ""."""
    head, slash, _ = key.rpartition("/")
    return head + slash


def _data_file(line: str, file_key: str, where: str) -> DataFile:
    document = _json_object(line, file_key, where)
    key = _required_string(document, "dataFileS3Key", file_key, where)
    md5_checksum = _optional_string(document, "md5Checksum", file_key, where)
    if md5_checksum is not None and not _is_base64_md5(md5_checksum):
        raise ExportManifestError(
            file_key, f"{where}: md5Checksum {md5_checksum!r} is not the base64 of a 16-byte MD5 digest"
        )
    return DataFile(
        data_file_s3_key=key,
        item_count=_count(document, "itemCount", file_key, where),
        md5_checksum=md5_checksum,
        etag=_optional_string(document, "etag", file_key, where),
    )


def _check_times(summary: ExportSummary, file_key: str) -> None:
    """An incremental export's summary must give its window; a full export's exportTime is optional."""
    if summary.is_incremental:
        if summary.export_from_time is None or summary.export_to_time is None:
            raise ExportManifestError(
                file_key, "an incremental export's summary gives its window in exportFromTime and exportToTime; "
                "this one lacks them"
            )
        if summary.export_from_time >= summary.export_to_time:
            raise ExportManifestError(file_key, "exportFromTime is not before exportToTime")


def _described_table(parameters: Any, file_key: str) -> dict[str, Any] | None:
    """tableCreationParameters (ImportTable's shape) checked and turned into DescribeTable's shape.

    Only the primary key matters to an import: one HASH key, optionally one RANGE key, each
    with an S, N or B definition. Billing is PAY_PER_REQUEST unless it says PROVISIONED with
    capacity. Other fields (TableName, indexes) are not used.
    """
    if parameters is None:
        return None
    where = TABLE_CREATION_FIELD
    if not isinstance(parameters, dict):
        raise ExportManifestError(file_key, f"{where} is a JSON {type(parameters).__name__}, not an object")
    keys = parameters.get("KeySchema")
    if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
        raise ExportManifestError(file_key, f"{where}.KeySchema is not a list of {{AttributeName, KeyType}}")
    schema = [(k.get("AttributeName"), k.get("KeyType")) for k in keys]
    names = [name for name, _ in schema]
    named = all(isinstance(name, str) and name for name in names) and len(set(names)) == len(names)
    if not named or [kind for _, kind in schema] not in (["HASH"], ["HASH", "RANGE"]):
        raise ExportManifestError(
            file_key, f"{where}.KeySchema must name one HASH key, optionally followed by one RANGE key"
        )
    definitions = parameters.get("AttributeDefinitions")
    types = {}
    if isinstance(definitions, list):
        types = {d.get("AttributeName"): d.get("AttributeType") for d in definitions if isinstance(d, dict)}
    for name, _ in schema:
        if types.get(name) not in _KEY_TYPES:
            raise ExportManifestError(
                file_key, f"{where}.AttributeDefinitions gives key attribute {name!r} no type S, N or B"
            )
    described: dict[str, Any] = {
        "KeySchema": [{"AttributeName": name, "KeyType": kind} for name, kind in schema],
        "AttributeDefinitions": [{"AttributeName": name, "AttributeType": types[name]} for name, _ in schema],
        "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
    }
    if parameters.get("BillingMode") == "PROVISIONED":
        throughput = parameters.get("ProvisionedThroughput") or {}
        capacity = {unit: throughput.get(unit) for unit in ("ReadCapacityUnits", "WriteCapacityUnits")}
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in capacity.values()):
            raise ExportManifestError(
                file_key, f"{where} is PROVISIONED but its ProvisionedThroughput lacks whole-number capacity units"
            )
        described["BillingModeSummary"] = {"BillingMode": "PROVISIONED"}
        described["ProvisionedThroughput"] = capacity
    elif parameters.get("BillingMode") not in (None, "PAY_PER_REQUEST"):
        raise ExportManifestError(
            file_key, f"{where}.BillingMode {parameters.get('BillingMode')!r} is not one of {', '.join(BILLING_MODES)}"
        )
    return described


def _json_object(text: str | bytes, file_key: str, where: str) -> Mapping[str, Any]:
    if isinstance(text, bytes):
        text = _utf8(text, file_key)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ExportManifestError(file_key, f"{where} is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise ExportManifestError(file_key, f"{where} is a JSON {type(document).__name__}, not an object")
    return document


def _utf8(data: bytes, file_key: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportManifestError(file_key, f"the file is not UTF-8 text ({exc})") from exc


def _required_string(document: Mapping[str, Any], name: str, file_key: str, where: str = "the file") -> str:
    value = _optional_string(document, name, file_key, where)
    if not value:
        raise ExportManifestError(file_key, f"{where} lacks {name}")
    return value


def _optional_string(document: Mapping[str, Any], name: str, file_key: str, where: str = "the file") -> str | None:
    value = document.get(name)
    if value is not None and not isinstance(value, str):
        raise ExportManifestError(file_key, f"{where}: {name} is {value!r}, not a string")
    return value


def _count(document: Mapping[str, Any], name: str, file_key: str, where: str) -> int:
    value = _optional_count(document, name, file_key, where)
    if value is None:
        raise ExportManifestError(file_key, f"{where} lacks {name}")
    return value


def _optional_count(document: Mapping[str, Any], name: str, file_key: str, where: str = "the file") -> int | None:
    value = document.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ExportManifestError(file_key, f"{where}: {name} is {value!r}, not a whole number of at least 0")
    return value


def _optional_time(document: Mapping[str, Any], name: str, file_key: str) -> datetime | None:
    value = _optional_string(document, name, file_key)
    if value is None:
        return None
    match = _ISO_TIME.fullmatch(value)
    if match is None:
        raise ExportManifestError(file_key, f"{name} {value!r} is not an ISO 8601 time like 2020-11-04T07:28:34.028Z")
    # fromisoformat before Python 3.11 takes neither "Z" nor every fraction length.
    fraction = (match["fraction"] or "").ljust(6, "0")[:6]
    zone = "+00:00" if match["zone"] == "Z" else match["zone"]
    try:
        return datetime.fromisoformat(f"{match['seconds']}.{fraction}{zone}")
    except ValueError as exc:  # shaped like a time, but not one (month 13, hour 25)
        raise ExportManifestError(file_key, f"{name} {value!r} is not a valid time ({exc})") from exc


def _is_base64_md5(text: str) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == MD5_DIGEST_BYTES
    except (binascii.Error, ValueError):
        return False
