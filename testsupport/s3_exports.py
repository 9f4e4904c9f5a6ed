"""Write DynamoDB S3 exports into a bucket the way AWS does, for the import tests.

Layout and formats follow "DynamoDB table export output format" (Amazon DynamoDB Developer
Guide, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):

    <prefix>/AWSDynamoDB/<export id>/_started                 written first, empty
    <prefix>/AWSDynamoDB/<export id>/manifest-summary.json    one JSON object
    <prefix>/AWSDynamoDB/<export id>/manifest-files.json      a JSON line per data file
    <prefix>/AWSDynamoDB/<export id>/data/<name>.json.gz      DYNAMODB_JSON lines, gzip
    <prefix>/AWSDynamoDB/<export id>/data/<name>.ion.gz       ION text lines, gzip

Items are given in DynamoDB JSON wire form (binary as base64 text), with numbers as
DynamoDB returns them (`dynamodb_numbers`), which is what an export holds. Each data file
is a list of lines built by `full_lines` or `incremental_lines`; `write_export` uploads
them with manifests whose md5Checksum, etag and itemCount match, unless a test asks
otherwise. `S3AccessLog` is the fault proxy with faults off that logs every request's
method and path, so a test can see which objects a job read.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Iterable

from testsupport.endpoint import scan_all
from testsupport.faultproxy import FaultProxy
from migrator.export.ion_text import dynamodb_number
from migrator.items import to_dynamodb_json

DYNAMODB_JSON = "DYNAMODB_JSON"
ION = "ION"
ACCOUNT = "123456789012"
REGION = "us-east-1"
EXPORT_TIME = "2024-05-01T10:00:00.000Z"


@dataclass(frozen=True)
class Change:
    """One line of an incremental export: the item's state after the window (None: deleted)."""

    keys: dict[str, Any]
    new_image: dict[str, Any] | None
    micros: int
    old_image: dict[str, Any] | None = None


@dataclass
class DataFileSpec:
    """One data file to write: its lines, and what its manifest line should say."""

    lines: list[str]
    item_count: int | None = None  # None: the number of lines
    with_md5: bool = True
    body: bytes | None = None  # None: the lines, gzip-compressed


@dataclass
class WrittenExport:
    bucket: str
    folder: str  # <prefix>/AWSDynamoDB/<export id>/
    summary_key: str
    files_key: str
    data_keys: list[str] = field(default_factory=list)
    bodies: dict[str, bytes] = field(default_factory=dict)  # what each data key should hold


# ---- items as an export holds them ----


def dynamodb_numbers(item: dict[str, Any]) -> dict[str, Any]:
    """The item with every number written as DynamoDB returns it (plain notation, no exponent)."""
    return {name: _numbers_in(value) for name, value in item.items()}


def _numbers_in(value: dict[str, Any]) -> dict[str, Any]:
    (kind, payload), = value.items()
    if kind == "N":
        return {"N": dynamodb_number(payload)}
    if kind == "NS":
        return {"NS": [dynamodb_number(n) for n in payload]}
    if kind == "L":
        return {"L": [_numbers_in(v) for v in payload]}
    if kind == "M":
        return {"M": {k: _numbers_in(v) for k, v in payload.items()}}
    return {kind: payload}


# ---- data file lines ----


def full_lines(items: Iterable[dict[str, Any]], output_format: str) -> list[str]:
    """A full export's lines: {"Item": ...} per item."""
    if output_format == DYNAMODB_JSON:
        return [json.dumps({"Item": item}, ensure_ascii=False) for item in items]
    return [f"$ion_1_0 {{Item:{_ion_struct(item)}}}" for item in items]


def incremental_lines(changes: Iterable[Change], output_format: str) -> list[str]:
    """An incremental export's lines (NEW_AND_OLD_IMAGES view): Metadata, Keys, OldImage, NewImage."""
    lines = []
    for change in changes:
        if output_format == DYNAMODB_JSON:
            document: dict[str, Any] = {"Metadata": {"WriteTimestampMicros": {"N": str(change.micros)}}, "Keys": change.keys}
            if change.old_image is not None:
                document["OldImage"] = change.old_image
            if change.new_image is not None:
                document["NewImage"] = change.new_image
            lines.append(json.dumps(document, ensure_ascii=False))
        else:
            fields = [f"Metadata:{{WriteTimestampMicros:{change.micros}}}", f"Keys:{_ion_struct(change.keys)}"]
            if change.old_image is not None:
                fields.append(f"OldImage:{_ion_struct(change.old_image)}")
            if change.new_image is not None:
                fields.append(f"NewImage:{_ion_struct(change.new_image)}")
            lines.append("$ion_1_0 {" + ",".join(fields) + "}")
    return lines


def gzip_lines(lines: list[str]) -> bytes:
    return gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), mtime=0)  # same lines, same bytes


# ---- Amazon Ion text, as exports write it (the mapping in migrator.export.ion_text) ----


def _ion_struct(item: dict[str, Any]) -> str:
    return "{" + ",".join(f"{_ion_symbol(name)}:{_ion_value(value)}" for name, value in item.items()) + "}"


def _ion_value(value: dict[str, Any]) -> str:
    (kind, payload), = value.items()
    if kind == "S":
        return json.dumps(payload, ensure_ascii=False)  # JSON's escapes are Ion's too
    if kind == "N":
        return _ion_decimal(payload)
    if kind == "B":
        return "{{" + payload + "}}"
    if kind == "BOOL":
        return "true" if payload else "false"
    if kind == "NULL":
        return "null"
    if kind == "SS":
        return "$dynamodb_SS::[" + ",".join(json.dumps(s, ensure_ascii=False) for s in payload) + "]"
    if kind == "NS":
        return "$dynamodb_NS::[" + ",".join(_ion_decimal(n) for n in payload) + "]"
    if kind == "BS":
        return "$dynamodb_BS::[" + ",".join("{{" + b + "}}" for b in payload) + "]"
    if kind == "L":
        return "[" + ",".join(_ion_value(v) for v in payload) + "]"
    if kind == "M":
        return _ion_struct(payload)
    raise ValueError(f"unknown DynamoDB type {kind}")


def _ion_decimal(number: str) -> str:
    """An Ion decimal with the same digits: "-3.14" → "-314d-2" (digits moved, never rounded)."""
    sign, digits, exponent = Decimal(number).as_tuple()
    return ("-" if sign else "") + "".join(map(str, digits)) + f"d{exponent}"


def _ion_symbol(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t")
    return f"'{escaped}'"


# ---- the export in a bucket ----


def new_export_id() -> str:
    return f"01714557600000-{uuid.uuid4().hex[:8]}"


def write_export(
    s3,
    bucket: str,
    files: list[DataFileSpec],
    *,
    output_format: str = DYNAMODB_JSON,
    incremental: bool = False,
    prefix: str = "exports",
    table: str = "Orders",
    summary_changes: dict[str, Any] | None = None,
) -> WrittenExport:
    """Upload data files and both manifests; `summary_changes` edits the summary (None values remove a field)."""
    export_id = new_export_id()
    folder = f"{prefix}/AWSDynamoDB/{export_id}/" if prefix else f"AWSDynamoDB/{export_id}/"
    written = WrittenExport(bucket, folder, folder + "manifest-summary.json", folder + "manifest-files.json")
    s3.put_object(Bucket=bucket, Key=folder + "_started", Body=b"")
    extension = ".json.gz" if output_format == DYNAMODB_JSON else ".ion.gz"
    manifest_lines = []
    for spec in files:
        body = spec.body if spec.body is not None else gzip_lines(spec.lines)
        key = f"{folder}data/{uuid.uuid4().hex[:26]}{extension}"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        written.data_keys.append(key)
        written.bodies[key] = gzip_lines(spec.lines)
        line: dict[str, Any] = {"itemCount": len(spec.lines) if spec.item_count is None else spec.item_count}
        if spec.with_md5:
            line["md5Checksum"] = md5_base64(gzip_lines(spec.lines))
        line["etag"] = hashlib.md5(body).hexdigest()
        line["dataFileS3Key"] = key
        manifest_lines.append(json.dumps(line))
    s3.put_object(Bucket=bucket, Key=written.files_key, Body=("\n".join(manifest_lines) + "\n").encode())
    summary = _summary(export_id, bucket, prefix, table, output_format, incremental, written.files_key, manifest_lines)
    for name, value in (summary_changes or {}).items():
        if value is None:
            summary.pop(name, None)
        else:
            summary[name] = value
    s3.put_object(Bucket=bucket, Key=written.summary_key, Body=json.dumps(summary, indent=3).encode())
    return written


def export_live_table(s3, dynamodb, table: str, export_time: datetime | None = None, files: int = 2) -> WrittenExport:
    """A full export of the table as it is now, in `files` data files; exportTime is now unless given."""
    export_time = export_time or datetime.now(timezone.utc)
    time.sleep(0.01)  # the next writes are after exportTime, whatever the clocks' resolution
    items = [dynamodb_numbers(to_dynamodb_json(i)) for i in scan_all(dynamodb, table)]
    parts = [DataFileSpec(full_lines(items[n::files], DYNAMODB_JSON)) for n in range(files)]
    times = {"exportTime": iso(export_time), "startTime": iso(export_time), "endTime": iso(export_time + timedelta(minutes=5))}
    return write_export(s3, create_bucket(s3), parts, table=table, summary_changes=times)


def iso(moment: datetime) -> str:
    """A manifest's time: ISO-8601 in UTC with milliseconds, as AWS writes them."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def md5_base64(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode("ascii")


def _summary(export_id, bucket, prefix, table, output_format, incremental, files_key, manifest_lines) -> dict[str, Any]:
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
    summary: dict[str, Any] = {
        "version": "2023-08-01" if incremental else "2020-06-30",
        "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": "2024-05-01T10:00:05.000Z",
        "endTime": "2024-05-01T10:05:00.000Z",
        "tableArn": table_arn,
        "tableId": "12345a12-abcd-123a-ab12-1234abc12345",
        "s3Bucket": bucket,
        "s3Prefix": prefix or None,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": files_key,
        "billedSizeBytes": 1024,
        "itemCount": sum(json.loads(line)["itemCount"] for line in manifest_lines),
        "outputFormat": output_format,
    }
    if incremental:
        summary.update(
            exportFromTime="2024-05-01T09:00:00.000Z",
            exportToTime="2024-05-01T10:00:00.000Z",
            outputView="NEW_AND_OLD_IMAGES",
            exportType="INCREMENTAL_EXPORT",
        )
    else:
        summary.update(exportTime=EXPORT_TIME, exportType="FULL_EXPORT")
    return summary


def create_bucket(s3, name: str | None = None) -> str:
    name = name or f"exports-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


# ---- which objects a job read ----


class _LoggingHandler(FaultProxy.handler):
    def handle_request(self) -> None:
        self.server.service.log_request(self.command, self.path, self.headers.get("X-Amz-Target"))
        super().handle_request()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = handle_request


class S3AccessLog(FaultProxy):
    """The fault proxy with faults off, logging (method, path, X-Amz-Target) of every request: an S3
    access log that also names the JSON-protocol operations (DynamoDB, its Streams, Kinesis).

    Point a job's source endpoint at `endpoint_url` (path-style requests, the default for a
    custom endpoint) and `reads_of(bucket)` gives the keys it fetched with GET; `requests` is the
    whole log (`testsupport.iam` turns it into IAM actions).
    """

    handler = _LoggingHandler

    def __init__(self, upstream_url: str):
        super().__init__(upstream_url, fault_rate=0.0)
        self._requests: list[tuple[str, str, str | None]] = []
        self._log_lock = threading.Lock()

    def log_request(self, method: str, path: str, target: str | None = None) -> None:
        with self._log_lock:
            self._requests.append((method, path, target))

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        """Snapshot of (method, path with query, X-Amz-Target or None) of every request, in order."""
        with self._log_lock:
            return list(self._requests)

    def reads_of(self, bucket: str) -> list[str]:
        """The keys of bucket fetched by GET, in order (query strings dropped)."""
        from urllib.parse import unquote, urlsplit

        keys = []
        for method, path, _ in self.requests:
            parts = unquote(urlsplit(path).path).lstrip("/").split("/", 1)
            if method == "GET" and len(parts) == 2 and parts[0] == bucket and parts[1]:
                keys.append(parts[1])
        return keys
