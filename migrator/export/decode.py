"""One data file of a DynamoDB S3 export, decoded line by line into wire-form items or records.

A data file is gzip-compressed text, one item per line ("DynamoDB table export output
format", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):

- DYNAMODB_JSON, full export:        {"Item": {"pk": {"S": "a"}, ...}}
- DYNAMODB_JSON, incremental export: {"Metadata": {"WriteTimestampMicros": {"N": "..."}},
                                      "Keys": {...}, "NewImage": {...}, "OldImage": {...}}
- ION: the same structure in Amazon Ion text, `$ion_1_0 {Item:{...}}` (see `ion_text`).

Items come out in DynamoDB JSON wire form, as `migrator.wire` sends them: numbers as
strings and binary as base64 text. A DynamoDB JSON line is passed on exactly as the export
holds it, after a check that each value is a DynamoDB attribute value; Ion values are
mapped to the same form (`ion_text.dynamodb_number` for numbers).

The file is read as a stream: one line is in memory at a time, never the decompressed
file. The checks that need the whole file run when its last line has been read: the MD5
of the compressed bytes against the manifest's md5Checksum, and the number of items
against its itemCount. Anything wrong (not gzip, truncated, corrupt, a line that is not
an item, a count or checksum that differs) raises ExportFileError naming the file's key,
the line and the reason. Items handed out before such a failure came from lines that
parsed, but the file as a whole is refused: callers must fail its task, never count it
as imported. To refuse a damaged file before using any of its items, call `verify_md5`
on its bytes first (a local copy), then decode them.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import zlib
from typing import Any, BinaryIO, Callable, Iterator, TypeVar

from migrator.export import ion_text
from migrator.export.errors import ExportFileError
from migrator.export.incremental import IncrementalRecord
from migrator.export.manifest import DYNAMODB_JSON, ION, DataFile
from migrator.items import Item

Record = TypeVar("Record")
Document = dict[str, Any]

READ_CHUNK_BYTES = 1 << 20
# DynamoDB nests maps and lists at most 32 levels deep; the check refuses far deeper values
# before Python's recursion limit does.
MAX_NESTING_DEPTH = 64

# The payload each DynamoDB JSON type carries (API reference, AttributeValue).
_PAYLOAD_TYPES: dict[str, type] = {
    "S": str, "N": str, "B": str, "BOOL": bool, "NULL": bool,
    "SS": list, "NS": list, "BS": list, "L": list, "M": dict,
}
_SET_TYPES = frozenset({"SS", "NS", "BS"})
# The top-level fields of a line that hold items; other fields are ignored.
_ITEM_SECTIONS = ("Item", "Keys", "NewImage", "OldImage", "Metadata")
_DIGITS = re.compile(r"[0-9]+")


class _BadLine(ValueError):
    """A line that is not an item of this export; the message says what is wrong with it."""


def read_items(data_file: DataFile, source: BinaryIO | bytes, output_format: str) -> Iterator[Item]:
    """The items of a full export's data file, in file order, from its gzip bytes (a stream or bytes)."""
    return _decode(data_file, source, output_format, _full_export_item)


def read_incremental_records(
    data_file: DataFile, source: BinaryIO | bytes, output_format: str
) -> Iterator[IncrementalRecord]:
    """The records of an incremental export's data file, in file order, from its gzip bytes."""
    return _decode(data_file, source, output_format, _incremental_record)


def md5_base64(source: BinaryIO | bytes) -> str:
    """The MD5 of the bytes, base64-encoded as manifest-files.json's md5Checksum (and S3's Content-MD5)."""
    reader = _HashingReader(source)
    reader.drain()
    return reader.md5_base64()


def verify_md5(data_file: DataFile, source: BinaryIO | bytes) -> None:
    """Refuse bytes whose MD5 is not the manifest's md5Checksum; a manifest line without one accepts anything."""
    if data_file.md5_checksum is not None:
        _check_md5(data_file, md5_base64(source))


def _decode(
    data_file: DataFile,
    source: BinaryIO | bytes,
    output_format: str,
    make_record: Callable[[Document, bool], Record],
) -> Iterator[Record]:
    """The file's records, made lazily by `make_record(document, trusted)` from each line."""
    read_document = _DOCUMENT_READERS.get(output_format)
    if read_document is None:  # checked here, not on the first next(): a wrong call fails at once
        raise ValueError(f"unknown export output format {output_format!r}")
    return _decode_lines(data_file, _HashingReader(source), read_document, make_record)


def _decode_lines(
    data_file: DataFile,
    raw: _HashingReader,
    read_document: Callable[[bytes], tuple[Document, bool]],
    make_record: Callable[[Document, bool], Record],
) -> Iterator[Record]:
    """Each non-blank line to a record; after the last one, the checks that need the whole file."""
    file_key = data_file.data_file_s3_key
    item_count = 0
    for line_number, line in _gzip_lines(file_key, raw):
        if not line.strip():
            continue
        try:
            document, trusted = read_document(line)
            record = make_record(document, trusted)
        except _BadLine as exc:
            raise ExportFileError(file_key, f"line {line_number}: {exc}") from exc
        item_count += 1
        yield record
    raw.drain()
    if data_file.md5_checksum is not None:
        _check_md5(data_file, raw.md5_base64())
    if item_count != data_file.item_count:
        raise ExportFileError(
            file_key,
            f"it holds {item_count} items but its manifest line says {data_file.item_count}: the file is "
            "incomplete or not the one the export wrote",
        )


def _gzip_lines(file_key: str, raw: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The decompressed lines, numbered from 1; gzip's complaints become ExportFileErrors."""
    line_number = 0
    try:
        with gzip.GzipFile(fileobj=raw, mode="rb") as lines:
            for line_number, line in enumerate(lines, start=1):
                yield line_number, line
    except EOFError as exc:
        raise ExportFileError(
            file_key, f"truncated: the gzip data ends before its end marker (after line {line_number})"
        ) from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise ExportFileError(file_key, f"corrupt gzip data after line {line_number} ({exc})") from exc


def _check_md5(data_file: DataFile, actual: str) -> None:
    if actual != data_file.md5_checksum:
        raise ExportFileError(
            data_file.data_file_s3_key,
            f"its MD5 is {actual} but its manifest line says {data_file.md5_checksum}: the object was "
            "changed or damaged after the export wrote it",
        )


# ---- lines to documents: {"Item": item} or {"Keys": ..., "NewImage": ..., "Metadata": ...} ----


def _json_document(line: bytes) -> tuple[Document, bool]:
    """A DYNAMODB_JSON line; its items still need checking (trusted is False)."""
    try:
        document = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not UTF-8 text ({exc})") from exc
    except ValueError as exc:
        raise _BadLine(f"not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise _BadLine("JSON nested deeper than Python can read; DynamoDB allows 32 levels") from exc
    if not isinstance(document, dict):
        raise _BadLine(f"a JSON {type(document).__name__}, not an object")
    return document, False


def _ion_document(line: bytes) -> tuple[Document, bool]:
    """An ION line, its structs unwrapped to items; the Ion reader built them, so they are trusted."""
    try:
        fields = ion_text.parse_line(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not UTF-8 text ({exc})") from exc
    except ion_text.IonSyntaxError as exc:
        raise _BadLine(f"not Ion as DynamoDB exports write it: {exc}") from exc
    document = {}
    for name in _ITEM_SECTIONS:
        value = fields.get(name)
        if value is None or "NULL" in value:
            continue
        if "M" not in value:
            raise _BadLine(f"{name} is not a struct")
        document[name] = value["M"]
    return document, True


_DOCUMENT_READERS: dict[str, Callable[[bytes], tuple[Document, bool]]] = {
    DYNAMODB_JSON: _json_document,
    ION: _ion_document,
}


# ---- documents to items and records ----


def _full_export_item(document: Document, trusted: bool) -> Item:
    item = document.get("Item")
    if not isinstance(item, dict):
        raise _BadLine("has no Item object (is this a full export's data file?)")
    if not trusted:
        _check_item(item, "Item")
    return item


def _incremental_record(document: Document, trusted: bool) -> IncrementalRecord:
    keys = document.get("Keys")
    if not isinstance(keys, dict) or not keys:
        raise _BadLine("has no Keys object (is this an incremental export's data file?)")
    new_image = document.get("NewImage")
    if new_image is not None and not isinstance(new_image, dict):
        raise _BadLine("NewImage is not an object")
    if not trusted:
        _check_item(keys, "Keys")
        if new_image is not None:
            _check_item(new_image, "NewImage")
    if new_image is not None:
        _check_same_key(keys, new_image)
    return IncrementalRecord(
        keys=keys, new_image=new_image, write_timestamp_micros=_write_timestamp_micros(document.get("Metadata"))
    )


def _check_same_key(keys: Item, new_image: Item) -> None:
    for name, value in keys.items():
        if new_image.get(name) != value:
            raise _BadLine(f"NewImage's key attribute {name!r} is not the one in Keys")


def _write_timestamp_micros(metadata: Any) -> int:
    """Metadata.WriteTimestampMicros, which exports write as a DynamoDB number ({"N": "..."}).

    A bare JSON integer or digit string is accepted too.
    """
    value = metadata.get("WriteTimestampMicros") if isinstance(metadata, dict) else None
    if isinstance(value, dict) and len(value) == 1 and "N" in value:
        value = value["N"]
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadLine("Metadata.WriteTimestampMicros is missing or not a whole number of microseconds")
    return value


# ---- DynamoDB JSON checks: every value one {type: payload} of a known type ----


def _check_item(item: Any, section: str) -> None:
    if not isinstance(item, dict):
        raise _BadLine(f"{section} is not an object")
    for name, value in item.items():
        reason = _value_problem(value, 1)
        if reason is not None:
            raise _BadLine(f"{section}: attribute {name!r}{reason}")


def _value_problem(value: Any, depth: int) -> str | None:
    """None for a well-formed attribute value, else the path into it and what is wrong there."""
    if depth > MAX_NESTING_DEPTH:
        return f": nested more than {MAX_NESTING_DEPTH} levels deep; DynamoDB allows 32"
    if not isinstance(value, dict) or len(value) != 1:
        return f": {_short(value)} is not a DynamoDB attribute value"
    (kind, payload), = value.items()
    payload_type = _PAYLOAD_TYPES.get(kind)
    if payload_type is None:
        return f": {kind!r} is not a DynamoDB type"
    if not isinstance(payload, payload_type) or (kind == "NULL" and payload is not True):
        return f": {kind} holds {_short(payload)}"
    if kind in _SET_TYPES:
        if not payload or not all(isinstance(member, str) for member in payload):
            return f": {kind} must be a non-empty list of strings, not {_short(payload)}"
    elif kind == "L":
        for index, member in enumerate(payload):
            reason = _value_problem(member, depth + 1)
            if reason is not None:
                return f"[{index}]{reason}"
    elif kind == "M":
        for name, member in payload.items():
            reason = _value_problem(member, depth + 1)
            if reason is not None:
                return f".{name}{reason}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _HashingReader(io.RawIOBase):
    """A read-only stream over `source` that keeps the MD5 of every byte read through it."""

    def __init__(self, source: BinaryIO | bytes):
        super().__init__()
        self._source = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
        # MD5 here checks integrity, as S3 does; usedforsecurity=False keeps it available under FIPS.
        self._md5 = hashlib.md5(usedforsecurity=False)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._source.read(size)
        self._md5.update(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def drain(self) -> None:
        """Read to the end, so the MD5 covers bytes a reader left unread."""
        while self.read(READ_CHUNK_BYTES):
            pass

    def md5_base64(self) -> str:
        return base64.b64encode(self._md5.digest()).decode("ascii")
