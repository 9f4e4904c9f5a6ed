"""Export manifests: the summary and the files list parsed as AWS documents them, problems named by field.

Fixtures follow AWS's "DynamoDB table export output format" (Amazon DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):
the full export's manifest-summary.json and manifest-files.json line are the guide's examples;
the incremental summary has the fields that guide lists for incremental exports (version
2023-08-01, exportFromTime, exportToTime, outputView, exportType, and no exportTime).
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from datetime import datetime, timezone

import pytest

from migrator.export.errors import ExportManifestError
from migrator.export.manifest import (
    DYNAMODB_JSON,
    FULL_EXPORT,
    INCREMENTAL_EXPORT,
    ION,
    DataFile,
    ExportLayout,
    check_item_counts,
    parse_data_files,
    parse_summary,
)

SUMMARY_KEY = "2020-Nov/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-summary.json"
FILES_KEY = "2020-Nov/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.json"

FULL_SUMMARY = {
    "version": "2020-06-30",
    "exportArn": "arn:aws:dynamodb:us-east-1:123456789012:table/ProductCatalog/export/01234567890123-a1b2c3d4",
    "startTime": "2020-11-04T07:28:34.028Z",
    "endTime": "2020-11-04T07:33:43.897Z",
    "tableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/ProductCatalog",
    "tableId": "12345a12-abcd-123a-ab12-1234abc12345",
    "exportTime": "2020-11-04T07:28:34.028Z",
    "s3Bucket": "ddb-productcatalog-export",
    "s3Prefix": "2020-Nov",
    "s3SseAlgorithm": "AES256",
    "s3SseKmsKeyId": None,
    "manifestFilesS3Key": "AWSDynamoDB/01345678901234-abc12345/manifest-files.json",
    "billedSizeBytes": 0,
    "itemCount": 8,
    "outputFormat": "DYNAMODB_JSON",
}

INCREMENTAL_SUMMARY = {
    "version": "2023-08-01",
    "exportArn": "arn:aws:dynamodb:us-east-1:123456789012:table/ProductCatalog/export/01695097218000-d6299cbd",
    "startTime": "2023-09-19T04:20:18.000Z",
    "endTime": "2023-09-19T04:40:24.780Z",
    "tableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/ProductCatalog",
    "tableId": "12345a12-abcd-123a-ab12-1234abc12345",
    "exportFromTime": "2023-09-18T17:00:00.000Z",
    "exportToTime": "2023-09-19T04:00:00.000Z",
    "s3Bucket": "ddb-productcatalog-export",
    "s3Prefix": "2023-Sep",
    "s3SseAlgorithm": "AES256",
    "s3SseKmsKeyId": None,
    "manifestFilesS3Key": "2023-Sep/AWSDynamoDB/01695097218000-d6299cbd/manifest-files.json",
    "billedSizeBytes": 4096,
    "itemCount": 3,
    "outputFormat": "ION",
    "outputView": "NEW_AND_OLD_IMAGES",
    "exportType": "INCREMENTAL_EXPORT",
}

# The guide's manifest-files.json line.
DOC_FILES_LINE = {
    "itemCount": 8,
    "md5Checksum": "sQMSpEILNgoQmarvDFonGQ==",
    "etag": "af83d6f217c19b8b0fff8023d8ca4716-1",
    "dataFileS3Key": "AWSDynamoDB/11111111111111-22222222/data/33334444EXAMPLE.json.gz",
}


def summary_text(base: dict, **changes) -> str:
    document = dict(base)
    for name, value in changes.items():
        if value is ...:
            document.pop(name, None)
        else:
            document[name] = value
    return json.dumps(document, indent=3)


def manifest_error(parse, text, file_key: str = SUMMARY_KEY) -> ExportManifestError:
    with pytest.raises(ExportManifestError) as caught:
        parse(text, file_key)
    assert caught.value.file_key == file_key
    assert str(caught.value).startswith(f"export manifest {file_key}: ")
    return caught.value


# ---- manifest-summary.json ----


def test_the_guides_full_export_summary_parses():
    summary = parse_summary(summary_text(FULL_SUMMARY), SUMMARY_KEY)
    assert summary.export_arn == FULL_SUMMARY["exportArn"]
    assert summary.table_arn == FULL_SUMMARY["tableArn"]
    assert summary.export_type == FULL_EXPORT  # the 2020 summary has no exportType
    assert summary.output_format == DYNAMODB_JSON
    assert summary.item_count == 8
    assert summary.manifest_files_s3_key == "AWSDynamoDB/01345678901234-abc12345/manifest-files.json"
    assert summary.export_time == datetime(2020, 11, 4, 7, 28, 34, 28000, tzinfo=timezone.utc)
    assert summary.reflects_time == summary.export_time
    assert summary.end_time == datetime(2020, 11, 4, 7, 33, 43, 897000, tzinfo=timezone.utc)
    assert (summary.s3_bucket, summary.s3_prefix, summary.billed_size_bytes) == ("ddb-productcatalog-export",
                                                                                 "2020-Nov", 0)
    assert (summary.version, summary.table_id, summary.output_view) == ("2020-06-30", FULL_SUMMARY["tableId"], None)
    assert not summary.is_incremental


def test_an_incremental_summary_without_export_time_parses_with_its_window():
    summary = parse_summary(summary_text(INCREMENTAL_SUMMARY).encode("utf-8"), SUMMARY_KEY)
    assert summary.is_incremental and summary.export_type == INCREMENTAL_EXPORT
    assert summary.export_time is None
    assert summary.export_from_time == datetime(2023, 9, 18, 17, tzinfo=timezone.utc)
    assert summary.export_to_time == datetime(2023, 9, 19, 4, tzinfo=timezone.utc)
    assert summary.reflects_time == summary.export_to_time
    assert (summary.output_format, summary.output_view) == (ION, "NEW_AND_OLD_IMAGES")


def test_a_full_export_summary_without_export_time_parses_and_falls_back_to_start_time():
    """An import does not need the time; chaining a stream after it would use startTime instead."""
    summary = parse_summary(summary_text(FULL_SUMMARY, exportTime=...), SUMMARY_KEY)
    assert summary.export_time is None
    assert summary.reflects_time == summary.start_time == datetime(2020, 11, 4, 7, 28, 34, 28000, tzinfo=timezone.utc)

    neither = parse_summary(summary_text(FULL_SUMMARY, exportTime=..., startTime=...), SUMMARY_KEY)
    assert neither.reflects_time is None


@pytest.mark.parametrize(("changes", "reason"), [
    ({"exportToTime": ...}, "exportFromTime and exportToTime"),
    ({"exportFromTime": "2023-09-19T05:00:00.000Z"}, "exportFromTime is not before exportToTime"),
])
def test_an_incremental_summary_needs_a_window(changes, reason):
    assert reason in manifest_error(parse_summary, summary_text(INCREMENTAL_SUMMARY, **changes)).reason


@pytest.mark.parametrize(("changes", "reason"), [
    ({"manifestFilesS3Key": ...}, "the file lacks manifestFilesS3Key"),
    ({"exportArn": ""}, "the file lacks exportArn"),
    ({"tableArn": 12}, "tableArn is 12, not a string"),
    ({"outputFormat": "CSV"}, "outputFormat 'CSV' is not one DynamoDB exports write (DYNAMODB_JSON, ION)"),
    ({"outputFormat": ...}, "the file lacks outputFormat"),
    ({"exportType": "PARTIAL_EXPORT"}, "exportType 'PARTIAL_EXPORT' is not one of FULL_EXPORT, INCREMENTAL_EXPORT"),
    ({"itemCount": "8"}, "itemCount is '8', not a whole number"),
    ({"itemCount": -1}, "itemCount is -1, not a whole number"),
    ({"itemCount": True}, "itemCount is True, not a whole number"),
    ({"itemCount": ...}, "the file lacks itemCount"),
    ({"billedSizeBytes": 1.5}, "billedSizeBytes is 1.5"),
    ({"exportTime": "yesterday"}, "exportTime 'yesterday' is not an ISO 8601 time"),
    ({"exportTime": "2020-13-04T07:28:34.028Z"}, "exportTime '2020-13-04T07:28:34.028Z' is not a valid time"),
])
def test_a_summary_field_that_is_wrong_is_named(changes, reason):
    assert reason in manifest_error(parse_summary, summary_text(FULL_SUMMARY, **changes)).reason


@pytest.mark.parametrize(("text", "reason"), [
    ("{not json", "the file is not valid JSON"),
    ("[1, 2]", "the file is a JSON list, not an object"),
    (b"\xff\xfe", "the file is not UTF-8 text"),
])
def test_a_summary_that_is_not_a_json_object_is_refused(text, reason):
    assert reason in manifest_error(parse_summary, text).reason


def test_times_with_other_fractions_and_offsets_parse():
    summary = parse_summary(summary_text(FULL_SUMMARY, exportTime="2020-11-04T07:28:34+02:00"))
    assert summary.export_time == datetime(2020, 11, 4, 5, 28, 34, tzinfo=timezone.utc)
    summary = parse_summary(summary_text(FULL_SUMMARY, exportTime="2020-11-04T07:28:34.123456789Z"))
    assert summary.export_time.microsecond == 123456


# ---- manifest-files.json ----


def test_the_guides_files_manifest_line_parses():
    (data_file,) = parse_data_files(json.dumps(DOC_FILES_LINE) + "\n", FILES_KEY)
    assert data_file == DataFile(
        data_file_s3_key="AWSDynamoDB/11111111111111-22222222/data/33334444EXAMPLE.json.gz",
        item_count=8,
        md5_checksum="sQMSpEILNgoQmarvDFonGQ==",
        etag="af83d6f217c19b8b0fff8023d8ca4716-1",
    )


def test_md5_checksum_is_the_base64_of_the_binary_digest_as_the_guides_etag_confirms():
    # S3's ETag of a one-part multipart upload is hex(MD5(the part's binary MD5)) + "-1": the
    # guide's etag is exactly that of its md5Checksum, so md5Checksum is base64(MD5(file bytes)).
    digest = base64.b64decode(DOC_FILES_LINE["md5Checksum"])
    assert len(digest) == 16
    assert hashlib.md5(digest).hexdigest() + "-1" == DOC_FILES_LINE["etag"]


def test_a_files_manifest_lists_every_file_in_order_and_skips_blank_lines():
    lines = [
        {"itemCount": 3, "md5Checksum": "1B2M2Y8AsgTpgAmY7PhCfg==", "etag": "d41d8cd98f00b204e9800998ecf8427e",
         "dataFileS3Key": "p/AWSDynamoDB/x/data/a.json.gz"},
        {"itemCount": 0, "dataFileS3Key": "p/AWSDynamoDB/x/data/b.json.gz"},
        {"itemCount": 5, "md5Checksum": "sQMSpEILNgoQmarvDFonGQ==", "dataFileS3Key": "p/AWSDynamoDB/x/data/c.json.gz"},
    ]
    text = "\n".join(json.dumps(line) for line in lines[:2]) + "\n\n" + json.dumps(lines[2]) + "\n"
    files = parse_data_files(text.encode("utf-8"), FILES_KEY)
    assert [f.data_file_s3_key for f in files] == [line["dataFileS3Key"] for line in lines]
    assert [f.item_count for f in files] == [3, 0, 5]
    assert files[1].md5_checksum is None and files[1].etag is None


@pytest.mark.parametrize(("bad_line", "reason"), [
    ('{"itemCount": 1}', "line 2 lacks dataFileS3Key"),
    ('{"dataFileS3Key": "k2"}', "line 2 lacks itemCount"),
    ('{"dataFileS3Key": "k2", "itemCount": 1, "md5Checksum": "not-base64"}',
     "line 2: md5Checksum 'not-base64' is not the base64 of a 16-byte MD5 digest"),
    ('{"dataFileS3Key": "k2", "itemCount": 1, "md5Checksum": "AAAA"}', "is not the base64 of a 16-byte MD5"),
    ('{"dataFileS3Key": "k1", "itemCount": 1}', "line 2: data file k1 is listed twice"),
    ('{"dataFileS3Key": "k2", "itemCount": 1', "line 2 is not valid JSON"),
    ('"k2"', "line 2 is a JSON str, not an object"),
])
def test_a_files_manifest_line_that_is_wrong_is_named(bad_line, reason):
    text = '{"dataFileS3Key": "k1", "itemCount": 1}\n' + bad_line + "\n"
    assert reason in manifest_error(parse_data_files, text, FILES_KEY).reason


def test_item_counts_must_add_up_to_the_summarys():
    summary = parse_summary(summary_text(FULL_SUMMARY))
    check_item_counts(summary, [DataFile("a", 5), DataFile("b", 3), DataFile("c", 0)])
    with pytest.raises(ExportManifestError) as caught:
        check_item_counts(summary, [DataFile("a", 5)], FILES_KEY)
    assert "hold 5 items in all" in caught.value.reason and "says 8" in caught.value.reason


# ---- where the files are ----


def test_keys_are_read_as_written_when_the_summary_is_where_the_export_wrote_it():
    summary_key = "2023-Sep/AWSDynamoDB/01695097218000-d6299cbd/manifest-summary.json"
    summary = parse_summary(summary_text(INCREMENTAL_SUMMARY), summary_key)
    layout = ExportLayout.of(summary_key, summary)
    key = "2023-Sep/AWSDynamoDB/01695097218000-d6299cbd/data/abc.ion.gz"
    assert layout.locate(summary.manifest_files_s3_key) == summary.manifest_files_s3_key
    assert layout.locate(key) == key


def test_keys_of_a_copied_export_are_read_beside_the_summary():
    """`aws s3 sync` to another prefix keeps the manifests' keys: they are moved to the summary's folder."""
    summary = parse_summary(summary_text(INCREMENTAL_SUMMARY), SUMMARY_KEY)
    layout = ExportLayout.of("copies/2023/AWSDynamoDB/01695097218000-d6299cbd/manifest-summary.json", summary)
    assert layout.folder == "copies/2023/AWSDynamoDB/01695097218000-d6299cbd/"
    assert layout.locate(summary.manifest_files_s3_key) == (
        "copies/2023/AWSDynamoDB/01695097218000-d6299cbd/manifest-files.json"
    )
    assert layout.locate("2023-Sep/AWSDynamoDB/01695097218000-d6299cbd/data/abc.ion.gz") == (
        "copies/2023/AWSDynamoDB/01695097218000-d6299cbd/data/abc.ion.gz"
    )
    assert layout.locate("elsewhere/data/x.ion.gz") == "elsewhere/data/x.ion.gz"  # not under the folder: as written


def test_a_summary_at_the_bucket_root_and_keys_without_folders():
    summary = parse_summary(summary_text(FULL_SUMMARY, manifestFilesS3Key="manifest-files.json"), SUMMARY_KEY)
    layout = ExportLayout.of("manifest-summary.json", summary)
    assert layout.folder == "" and layout.locate("manifest-files.json") == "manifest-files.json"


def test_manifest_error_is_bad_input_and_pickles_back_from_an_executor():
    error = ExportManifestError(FILES_KEY, "line 2 lacks itemCount")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.file_key, copy.reason) == (type(error), str(error), FILES_KEY, error.reason)
    assert copy.exit_code == 2 and copy.retryable is False
