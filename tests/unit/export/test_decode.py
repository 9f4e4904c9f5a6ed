"""Export data files: every type bit-exact from DYNAMODB_JSON and ION, damaged files refused by key and line.

Fixtures follow AWS's "DynamoDB table export output format" (Amazon DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):
gzip-compressed JSON lines `{"Item": {...}}`, or Ion text lines `$ion_1_0 {Item:{...}}` with
numbers as Ion decimals, binary as blobs and sets as lists annotated $dynamodb_SS/NS/BS;
incremental exports carry Metadata.WriteTimestampMicros, Keys, NewImage and OldImage.
They are built here in memory. Expected numbers are written as DynamoDB returns them
(plain notation, never an exponent), which is what a DYNAMODB_JSON export holds.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import pickle

import pytest

from migrator.export import ion_text
from migrator.export.decode import md5_base64, read_incremental_records, read_items, verify_md5
from migrator.export.errors import ExportFileError
from migrator.export.incremental import IncrementalRecord
from migrator.export.manifest import DYNAMODB_JSON, ION, DataFile
from migrator.items import to_dynamodb_json
from testsupport.all_types import all_types_items

KEY = "exports/AWSDynamoDB/01700000000000-abcdef12/data/abcdefghijklmnopqrstuvwxyz.json.gz"

N_1E125 = "1" + "0" * 125                                  # 1E+125
N_MAX = "9" * 38 + "0" * 88                                # 9.9999999999999999999999999999999999999E+125
N_1E_130 = "0." + "0" * 129 + "1"                          # 1E-130, the smallest magnitude
LARGE_STRING = "x" * 399_000                               # an item near DynamoDB's 400 KB limit

# Every DynamoDB type, in DynamoDB JSON wire form (binary as base64), as a DYNAMODB_JSON export holds it.
EXPECTED_ITEMS = [
    {"pk": {"S": "scalars"}, "sk": {"N": "1"},
     "s": {"S": "plain"}, "empty_s": {"S": ""},
     "n38": {"N": "12345678901234567890123456789012345678"},
     "n38_neg_frac": {"N": "-0.1234567890123456789012345678901234567"},
     "n_max": {"N": N_MAX}, "n_1e125": {"N": N_1E125},
     "n_min_pos": {"N": N_1E_130}, "n_min_neg": {"N": "-" + N_1E_130},
     "n_zero": {"N": "0"}, "n_frac": {"N": "3.14"},
     "b": {"B": "AAEC/f7/"}, "empty_b": {"B": ""},
     "bool_t": {"BOOL": True}, "bool_f": {"BOOL": False}, "null": {"NULL": True}},
    {"pk": {"S": "sets"}, "sk": {"N": "2"},
     "ss": {"SS": ["a", "b", "ü", "🚀"]},
     "ns": {"NS": ["1", "-" + N_1E_130, "12345678901234567890123456789012345678", "3.14"]},
     "bs": {"BS": ["AA==", "AAE=", "/w=="]}},
    {"pk": {"S": "nested"}, "sk": {"N": "3"},
     "m": {"M": {"l": {"L": [{"N": "1"}, {"S": "x"}, {"NULL": True}, {"BOOL": False},
                             {"M": {"deep": {"M": {"deeper": {"L": [{"B": "3q2+7w=="}, {"SS": ["x"]}]}}}}}]},
                 "empty_m": {"M": {}}, "empty_l": {"L": []},
                 "n": {"N": "-99999999999999999999999999999999999999"}}}},
    {"pk": {"S": "unicode ключ 東京"}, "sk": {"N": "4"},
     "ключ": {"S": "значение"}, "名前": {"S": "値"}, "emoji 🚀 name": {"N": "42"},
     "ä.b-c_d": {"S": "dots and dashes"}, "quote'and\"back\\slash": {"S": "tab\there\nnewline café 🚀🚀"}},
    {"pk": {"B": "AAEC"}, "sk": {"N": "-5.5"}, "bin_only": {"B": "//79/A=="}},
    {"pk": {"S": "large"}, "sk": {"N": "400"}, "pad": {"S": LARGE_STRING}},
]

# The same items as an ION export writes them: decimals as AWS shows them (`103.`, `6d2`),
# names that are not Ion identifiers as 'quoted symbols', and characters as raw UTF-8,
# \u escapes, \U escapes or a UTF-16 surrogate pair.
ION_LINES = [
    "$ion_1_0 {Item:{pk:\"scalars\",sk:1.,s:\"plain\",empty_s:\"\","
    "n38:12345678901234567890123456789012345678.,n38_neg_frac:-0.1234567890123456789012345678901234567,"
    "n_max:9.9999999999999999999999999999999999999d125,n_1e125:1d125,n_min_pos:1d-130,n_min_neg:-1d-130,"
    "n_zero:0.,n_frac:314d-2,b:{{AAEC/f7/}},empty_b:{{}},bool_t:true,bool_f:false,'null':null}}",
    "$ion_1_0 {Item:{pk:\"sets\",sk:2d0,ss:$dynamodb_SS::[\"a\",\"b\",\"ü\",\"\\U0001F680\"],"
    "ns:$dynamodb_NS::[1.,-1d-130,12345678901234567890123456789012345678.,3.14],"
    "bs:$dynamodb_BS::[{{AA==}},{{ AAE= }},{{/w==}}]}}",
    "$ion_1_0 {Item:{pk:\"nested\",sk:3.,m:{l:[1.,\"x\",null,false,{deep:{deeper:[{{3q2+7w==}},"
    "$dynamodb_SS::[\"x\"]]}}],empty_m:{},empty_l:[],n:-99999999999999999999999999999999999999.}}}",
    "$ion_1_0 {Item:{pk:\"unicode ключ 東京\",sk:4.,'ключ':\"значение\",'名前':\"値\",'emoji 🚀 name':42.,"
    "'ä.b-c_d':\"dots and dashes\",'quote\\'and\"back\\\\slash':\"tab\\there\\nnewline caf\\u00e9 "
    "\\U0001f680\\uD83D\\uDE80\"}}",
    "$ion_1_0 {Item:{pk:{{AAEC}},sk:-55d-1,bin_only:{{//79/A==}}}}",
    "$ion_1_0 {Item:{pk:\"large\",sk:4d2,pad:\"" + LARGE_STRING + "\"}}",
]

# The Developer Guide's own example item, once as DYNAMODB_JSON and once as ION.
DOC_JSON_LINE = json.dumps({"Item": {
    "Authors": {"SS": ["Author1", "Author2"]}, "Dimensions": {"S": "8.5 x 11.0 x 1.5"},
    "ISBN": {"S": "333-3333333333"}, "Id": {"N": "103"}, "InPublication": {"BOOL": False},
    "PageCount": {"N": "600"}, "Price": {"N": "2000"}, "ProductCategory": {"S": "Book"},
    "Title": {"S": "Book 103 Title"},
}})
DOC_ION_LINE = (
    '$ion_1_0 {Item:{Authors:$dynamodb_SS::["Author1","Author2"],Dimensions:"8.5 x 11.0 x 1.5",'
    'ISBN:"333-3333333333",Id:103.,InPublication:false,PageCount:6d2,Price:2d3,ProductCategory:"Book",'
    'Title:"Book 103 Title"}}'
)


def gzip_lines(lines: list[str]) -> bytes:
    """A data file's bytes: the lines, each ending in a newline, gzip-compressed."""
    return gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"))


def manifest_line(body: bytes, item_count: int, key: str = KEY) -> DataFile:
    """The file's manifest-files.json line: md5Checksum is the base64 of the binary MD5 digest."""
    return DataFile(data_file_s3_key=key, item_count=item_count,
                    md5_checksum=base64.b64encode(hashlib.md5(body).digest()).decode("ascii"))


def json_lines(items: list[dict]) -> list[str]:
    return [json.dumps({"Item": item}, ensure_ascii=False) for item in items]


def decode_items(lines: list[str], output_format: str, item_count: int | None = None) -> list[dict]:
    body = gzip_lines(lines)
    count = len(lines) if item_count is None else item_count
    return list(read_items(manifest_line(body, count), io.BytesIO(body), output_format))


def file_error(body: bytes, data_file: DataFile, output_format: str = DYNAMODB_JSON) -> ExportFileError:
    with pytest.raises(ExportFileError) as caught:
        list(read_items(data_file, body, output_format))
    assert caught.value.file_key == data_file.data_file_s3_key
    assert data_file.data_file_s3_key in str(caught.value)
    return caught.value


# ---- every type, bit-exact ----


def test_dynamodb_json_items_come_out_exactly_as_the_export_holds_them():
    assert decode_items(json_lines(EXPECTED_ITEMS), DYNAMODB_JSON) == EXPECTED_ITEMS


def test_ion_file_decodes_to_the_same_wire_items_as_the_dynamodb_json_file():
    from_json = decode_items(json_lines(EXPECTED_ITEMS), DYNAMODB_JSON)
    from_ion = decode_items(ION_LINES, ION)
    assert from_ion == from_json == EXPECTED_ITEMS


def test_the_developer_guides_example_item_is_the_same_in_both_formats():
    assert decode_items([DOC_ION_LINE], ION) == decode_items([DOC_JSON_LINE], DYNAMODB_JSON)


def test_the_shared_all_types_items_pass_through_dynamodb_json_untouched():
    # These keep the exponent spellings the emulator stores ("1E-130"): JSON numbers are never rewritten.
    items = [to_dynamodb_json(item) for item in all_types_items()]
    assert decode_items(json_lines(items), DYNAMODB_JSON) == items


@pytest.mark.parametrize(("ion_decimal", "dynamodb_number"), [
    ("103.", "103"), ("6d2", "600"), ("2D+3", "2000"), ("1.10", "1.1"), ("-0.", "0"), ("0d-3", "0"),
    ("-55d-1", "-5.5"), ("1d-3", "0.001"), ("123", "123"), ("1d125", N_1E125), ("1d-130", N_1E_130),
    ("9.9999999999999999999999999999999999999d125", N_MAX),
    ("12345678901234567890123456789012345678.", "12345678901234567890123456789012345678"),
    ("1234567890123456789012345678901234567800000d-5", "12345678901234567890123456789012345678"),
])
def test_ion_decimals_become_the_number_strings_dynamodb_returns(ion_decimal, dynamodb_number):
    line = f"$ion_1_0 {{Item:{{n:{ion_decimal}}}}}"
    assert ion_text.parse_line(line) == {"Item": {"M": {"n": {"N": dynamodb_number}}}}


def test_incremental_lines_decode_to_puts_and_deletes_in_both_formats():
    # One insert, one update (new and old image), one delete with its old image (NEW_AND_OLD_IMAGES),
    # one delete with keys only (NEW_IMAGE view).
    json_file = [
        '{"Metadata":{"WriteTimestampMicros":{"N":"1700000000000001"}},"Keys":{"pk":{"S":"new"}},'
        '"NewImage":{"pk":{"S":"new"},"n":{"N":"1"}}}',
        '{"Metadata":{"WriteTimestampMicros":{"N":"1700000000000002"}},"Keys":{"pk":{"S":"changed"}},'
        '"NewImage":{"pk":{"S":"changed"},"b":{"B":"AAE="}},"OldImage":{"pk":{"S":"changed"},"b":{"B":"AA=="}}}',
        '{"Metadata":{"WriteTimestampMicros":{"N":"1700000000000003"}},"Keys":{"pk":{"S":"gone"}},'
        '"OldImage":{"pk":{"S":"gone"},"n":{"N":"3"}}}',
        '{"Metadata":{"WriteTimestampMicros":{"N":"1700000000000004"}},"Keys":{"pk":{"S":"gone too"}}}',
    ]
    ion_file = [
        '$ion_1_0 {Metadata:{WriteTimestampMicros:1700000000000001.},Keys:{pk:"new"},NewImage:{pk:"new",n:1.}}',
        '$ion_1_0 {Metadata:{WriteTimestampMicros:1700000000000002.},Keys:{pk:"changed"},'
        'NewImage:{pk:"changed",b:{{AAE=}}},OldImage:{pk:"changed",b:{{AA==}}}}',
        '$ion_1_0 {Metadata:{WriteTimestampMicros:1700000000000003.},Keys:{pk:"gone"},OldImage:{pk:"gone",n:3.}}',
        '$ion_1_0 {Metadata:{WriteTimestampMicros:1700000000000004},Keys:{pk:"gone too"}}',
    ]
    expected = [
        IncrementalRecord({"pk": {"S": "new"}}, {"pk": {"S": "new"}, "n": {"N": "1"}}, 1700000000000001),
        IncrementalRecord({"pk": {"S": "changed"}}, {"pk": {"S": "changed"}, "b": {"B": "AAE="}}, 1700000000000002),
        IncrementalRecord({"pk": {"S": "gone"}}, None, 1700000000000003),
        IncrementalRecord({"pk": {"S": "gone too"}}, None, 1700000000000004),
    ]
    for lines, output_format in ((json_file, DYNAMODB_JSON), (ion_file, ION)):
        body = gzip_lines(lines)
        records = list(read_incremental_records(manifest_line(body, 4), body, output_format))
        assert records == expected
        assert [record.is_delete for record in records] == [False, False, True, True]


def test_write_timestamp_micros_is_also_accepted_as_a_bare_integer():
    body = gzip_lines(['{"Metadata":{"WriteTimestampMicros":1700000000000001},"Keys":{"pk":{"S":"a"}}}'])
    (record,) = read_incremental_records(manifest_line(body, 1), body, DYNAMODB_JSON)
    assert record.write_timestamp_micros == 1700000000000001


# ---- damaged files: each fails with the file's key and the reason ----


def test_truncated_gzip_is_refused():
    body = gzip_lines(json_lines(EXPECTED_ITEMS[:5]))
    cut = body[: len(body) // 2]
    error = file_error(cut, manifest_line(body, 5))
    assert "truncated" in error.reason


def test_a_file_that_is_not_gzip_is_refused():
    body = "\n".join(json_lines(EXPECTED_ITEMS[:2])).encode("utf-8")
    error = file_error(body, manifest_line(body, 2))
    assert "corrupt gzip" in error.reason and "Not a gzipped file" in error.reason


def test_a_gzip_checksum_failure_is_refused():
    body = bytearray(gzip_lines(json_lines(EXPECTED_ITEMS[:2])))
    body[-8] ^= 0xFF  # the CRC-32 of the decompressed data, in the gzip trailer
    error = file_error(bytes(body), DataFile(KEY, 2))
    assert "corrupt gzip" in error.reason and "CRC" in error.reason


def test_damaged_compressed_data_is_refused():
    body = bytearray(gzip_lines(json_lines(EXPECTED_ITEMS)))
    for offset in range(20, len(body) - 20, 97):
        body[offset] ^= 0x55
    # Whether zlib, the CRC or a garbled line notices first, the file is refused by its key.
    file_error(bytes(body), DataFile(KEY, len(EXPECTED_ITEMS)))


@pytest.mark.parametrize(("bad_line", "reason"), [
    ('{"Item": {"pk": {"S": "a"}', "line 2: not valid JSON"),
    ('["Item"]', "line 2: a JSON list, not an object"),
    ('{"Keys": {"pk": {"S": "a"}}}', "line 2: has no Item object"),
    ('{"Item": {"pk": {"X": "a"}}}', "line 2: Item: attribute 'pk': 'X' is not a DynamoDB type"),
    ('{"Item": {"pk": {"N": 1.5}}}', "line 2: Item: attribute 'pk': N holds 1.5"),
    ('{"Item": {"pk": {"S": "a", "N": "1"}}}', "is not a DynamoDB attribute value"),
    ('{"Item": {"m": {"M": {"l": {"L": [{"S": "x"}, "y"]}}}}}', "attribute 'm'.l[1]: 'y' is not"),
    ('{"Item": {"ss": {"SS": []}}}', "SS must be a non-empty list of strings"),
    ('{"Item": {"n": {"NULL": false}}}', "NULL holds False"),
])
def test_a_line_that_is_not_an_item_is_refused_with_its_number(bad_line, reason):
    lines = json_lines(EXPECTED_ITEMS[:1]) + [bad_line] + json_lines(EXPECTED_ITEMS[1:2])
    body = gzip_lines(lines)
    error = file_error(body, manifest_line(body, 3))
    assert reason in error.reason


@pytest.mark.parametrize(("output_format", "levels", "reason"), [
    (DYNAMODB_JSON, 70, "nested more than 64 levels deep"),
    (DYNAMODB_JSON, 100_000, "JSON nested deeper than Python can read"),
    (ION, 5_000, "nested more than 64 levels deep"),
], ids=["json-70", "json-100000", "ion-5000"])
def test_values_nested_far_deeper_than_dynamodb_allows_are_refused(output_format, levels, reason):
    # DynamoDB nests at most 32 levels; a damaged line must not end in Python's RecursionError.
    if output_format == DYNAMODB_JSON:
        line = '{"Item": {"l": ' + '{"L": [' * levels + ']}' * levels + '}}'
    else:
        line = "$ion_1_0 {Item:{l:" + "[" * levels + "]" * levels + "}}"
    body = gzip_lines([line])
    assert reason in file_error(body, manifest_line(body, 1), output_format).reason


def test_values_nested_32_levels_deep_are_items():
    json_line = '{"Item": {"l": ' + '{"L": [' * 31 + ']}' * 31 + '}}'
    ion_line = "$ion_1_0 {Item:{l:" + "[" * 31 + "]" * 31 + "}}"
    assert decode_items([json_line], DYNAMODB_JSON) == decode_items([ion_line], ION)


def test_a_line_that_is_not_utf8_is_refused():
    body = gzip.compress(b'{"Item": {"s": {"S": "\xff"}}}\n')
    assert "line 1: not UTF-8" in file_error(body, manifest_line(body, 1)).reason


@pytest.mark.parametrize(("bad_line", "reason"), [
    ("$ion_1_0 {Item:{n:1.5e0}}", "the float 1.5e0"),
    ("$ion_1_0 {Item:{t:2020-11-04T07:28:34.028Z}}", "unsupported value '2020-11-04T07:28:34.028Z'"),
    ("$ion_1_0 {Item:{n:0x1F}}", "unsupported value '0x1F'"),
    ("$ion_1_0 {Item:{s:abc}}", "the symbol value 'abc'"),
    ("$ion_1_0 {Item:{s:'abc'}}", "a symbol value"),
    ("$ion_1_0 {Item:{s:(a b)}}", "an s-expression"),
    ("$ion_1_0 {Item:{s:'''long'''}}", "long strings"),
    ("$ion_1_0 {Item:{c:{{\"clob\"}}}}", "a clob"),
    ("$ion_1_0 {Item:{n:null.decimal}}", "a typed null (null.decimal)"),
    ("$ion_1_0 {Item:{n:nan}}", "nan, a float"),
    ("$ion_1_0 {Item:{s:$dynamodb_XS::[\"a\"]}}", "the annotation $dynamodb_XS:: is not one"),
    ("$ion_1_0 {Item:{s:$dynamodb_SS::[1.]}}", "a SS set holds a number"),
    ("$ion_1_0 {Item:{s:$dynamodb_NS::[]}}", "an empty NS set"),
    ("$ion_1_0 {Item:{s:$dynamodb_SS::\"a\"}}", "$dynamodb_SS annotates a string, not a list"),
    ("$ion_1_0 {Item:{n:123456789012345678901234567890123456789.}}", "39 significant digits"),
    ("$ion_1_0 {Item:{n:1d126}}", "outside the magnitudes DynamoDB stores"),
    ("$ion_1_0 {Item:{n:1d-131}}", "outside the magnitudes DynamoDB stores"),
    ("$ion_1_0 {Item:{b:{{AAE}}}}", "the blob is not valid base64"),
    ("$ion_1_0 {Item:{s:\"\\uD83D\"}}", "a lone UTF-16 surrogate"),
    ("$ion_1_0 {Item:{s:\"\\q\"}}", "unknown escape"),
    ("$ion_1_0 {Item:{s:\"open}}", "unterminated string"),
    ("$ion_1_0 {Item:{a:\"x\",a:\"y\"}}", "the field 'a' appears twice"),
    ("$ion_1_0 {Item:{$10:\"x\"}}", "symbol ID $10"),
    ("$ion_1_0 {Item:{a:\"x\" b:\"y\"}}", "expected '}' or ',' after a struct field"),
    ("$ion_1_0 {Item:{a:[1. 2.]}}", "expected ']' or ',' after a list member"),
    ("$ion_1_0 {Item:{a:1.}} {Item:{}}", "more than one value on the line"),
    ("$ion_1_0 [1.]", "the line holds a list, not a struct"),
    ("$ion_1_0 {Item:\"x\"}", "Item is not a struct"),
    ("$ion_1_0 {Item:{a:1.}} // note", "more than one value"),
    ("$ion_1_0 {Item:{a:/* note */1.}}", "a comment"),
])
def test_ion_that_dynamodb_exports_do_not_write_is_refused_by_name(bad_line, reason):
    body = gzip_lines([DOC_ION_LINE, bad_line])
    error = file_error(body, manifest_line(body, 2), ION)
    assert error.reason.startswith("line 2: ")
    assert reason in error.reason


def test_ion_errors_say_the_column():
    with pytest.raises(ion_text.IonSyntaxError) as caught:
        ion_text.parse_line("$ion_1_0 {Item:{n:1.5e0}}")
    assert caught.value.column == len("$ion_1_0 {Item:{n:") + 1


def test_ion_accepts_what_the_grammar_allows_around_the_values_exports_write():
    line = ("$ion_1_0   { Item : { 'a b' : \"x\" , \"quoted name\":[ 1. , 2d0 , ] , m:{ k:null.null , } ,"
            " empty:\"\\0\\a\\b\\t\\n\\f\\r\\v\\?\\'\\\"\\/\\\\\\x41\" } }  ")
    assert ion_text.parse_line(line) == {"Item": {"M": {
        "a b": {"S": "x"},
        "quoted name": {"L": [{"N": "1"}, {"N": "2"}]},
        "m": {"M": {"k": {"NULL": True}}},
        "empty": {"S": "\0\a\b\t\n\f\r\v?'\"/\\A"},
    }}}
    assert ion_text.parse_line('{Item:{a:"no version marker"}}') == {"Item": {"M": {"a": {"S": "no version marker"}}}}


def test_item_count_mismatch_is_refused():
    body = gzip_lines(json_lines(EXPECTED_ITEMS[:2]))
    error = file_error(body, manifest_line(body, 3))
    assert "it holds 2 items but its manifest line says 3" in error.reason


def test_md5_mismatch_is_refused():
    body = gzip_lines(json_lines(EXPECTED_ITEMS[:2]))
    other = manifest_line(gzip_lines(json_lines(EXPECTED_ITEMS[2:4])), 2)
    error = file_error(body, other)
    assert f"its MD5 is {manifest_line(body, 2).md5_checksum}" in error.reason
    assert f"says {other.md5_checksum}" in error.reason


def test_verify_md5_checks_raw_bytes_before_anything_is_decoded():
    body = gzip_lines(json_lines(EXPECTED_ITEMS[:2]))
    verify_md5(manifest_line(body, 2), body)
    verify_md5(manifest_line(body, 2), io.BytesIO(body))
    verify_md5(DataFile(KEY, 2, md5_checksum=None), b"anything: the manifest line gives no checksum")
    with pytest.raises(ExportFileError, match="changed or damaged"):
        verify_md5(manifest_line(body, 2), body + b"\0")


def test_md5_base64_is_the_manifests_encoding_of_the_digest():
    assert md5_base64(b"") == "1B2M2Y8AsgTpgAmY7PhCfg=="  # MD5 of nothing, as S3's Content-MD5 spells it
    assert md5_base64(io.BytesIO(b"abc")) == base64.b64encode(hashlib.md5(b"abc").digest()).decode()


def test_an_empty_file_of_an_empty_partition_has_no_items():
    # "For partitions that are empty, your export request will create an empty file."
    assert list(read_items(DataFile(KEY, 0, md5_base64(b"")), b"", DYNAMODB_JSON)) == []
    assert list(read_items(DataFile(KEY, 0), gzip.compress(b""), ION)) == []


def test_blank_lines_are_not_items():
    body = gzip.compress(("\n" + DOC_JSON_LINE + "\n\n").encode("utf-8"))
    assert len(list(read_items(manifest_line(body, 1), body, DYNAMODB_JSON))) == 1


def test_items_are_streamed_one_line_at_a_time():
    lines = [json.dumps({"Item": {"pk": {"S": hashlib.sha256(str(i).encode()).hexdigest() * 4}}})
             for i in range(20_000)]
    body = gzip_lines(lines)
    stream = io.BytesIO(body)
    items = read_items(manifest_line(body, len(lines)), stream, DYNAMODB_JSON)
    first = next(items)
    assert first == json.loads(lines[0])["Item"]
    assert stream.tell() < len(body) // 4, "the first item needed most of the file"
    assert sum(1 for _ in items) == len(lines) - 1
    assert stream.tell() == len(body)


def test_incremental_line_damage_is_refused():
    cases = [
        ('{"Keys":{"pk":{"S":"a"}},"NewImage":{"pk":{"S":"a"}}}', "Metadata.WriteTimestampMicros is missing"),
        ('{"Metadata":{"WriteTimestampMicros":{"N":"1.5"}},"Keys":{"pk":{"S":"a"}}}', "not a whole number"),
        ('{"Metadata":{"WriteTimestampMicros":{"N":"1"}},"Keys":{"pk":{"S":"a"}},"NewImage":{"pk":{"S":"b"}}}',
         "NewImage's key attribute 'pk' is not the one in Keys"),
        ('{"Metadata":{"WriteTimestampMicros":{"N":"1"}},"Keys":{"pk":{"S":"a"}},"NewImage":["x"]}',
         "NewImage is not an object"),
        (DOC_JSON_LINE, "has no Keys object (is this an incremental export's data file?)"),
    ]
    for bad_line, reason in cases:
        body = gzip_lines([bad_line])
        with pytest.raises(ExportFileError) as caught:
            list(read_incremental_records(manifest_line(body, 1), body, DYNAMODB_JSON))
        assert caught.value.reason.startswith("line 1: ") and reason in caught.value.reason


def test_an_unknown_output_format_is_a_programming_error_raised_at_once():
    with pytest.raises(ValueError, match="CSV"):
        read_items(DataFile(KEY, 0), b"", "CSV")


def test_export_file_error_pickles_back_from_an_executor():
    error = ExportFileError(KEY, "truncated: the gzip data ends before its end marker (after line 3)")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.file_key, copy.reason) == (type(error), str(error), KEY, error.reason)
    assert copy.exit_code == 1 and copy.retryable is False
    assert str(error).startswith(f"export data file {KEY}: truncated")
