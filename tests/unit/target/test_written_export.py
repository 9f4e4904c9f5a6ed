"""Reading back an export the migrator wrote to a local folder (`export_folder.read_written_export`),
and reading its data files in place (`export_copy.local_copy`): what the validator relies on.

Each export here is written with the writer's own code (`migrator.export.output`), so the folder
holds exactly what `target.type: dynamodb-s3-export` leaves behind.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from migrator.errors import ExportPathError
from migrator.export.decode import read_items
from migrator.export.errors import ExportFileError
from migrator.export.manifest import DYNAMODB_JSON, SUMMARY_FILE_NAME, DataFile
from migrator.export.output import (
    DataFileEncoder,
    ExportFacts,
    data_file_name,
    export_folder,
    files_manifest,
    summary_document,
    table_creation_parameters,
)
from migrator.snapshot.export_copy import FileTask, local_copy
from migrator.target.export_folder import ExportFolder, read_written_export

MOMENT = datetime(2024, 5, 1, 10, 0, 5, tzinfo=timezone.utc)
ITEMS = [{"pk": {"S": "a"}, "n": {"N": "12345678901234567890123456789012345678"}}, {"pk": {"S": "b"}, "b": {"B": "AP8="}}]


def write_local_export(root: Path, export_id: str, finished: bool = True) -> str:
    """An export of ITEMS (one data file) under `root`, as the writer lays it out; returns its folder."""
    folder = export_folder(export_id)
    data_key = folder + data_file_name(0)
    (root / folder / "data").mkdir(parents=True)
    with open(root / data_key, "wb") as out, DataFileEncoder(out) as encoder:
        encoder.write_items(ITEMS)
    (root / folder / "_started").write_bytes(b"")
    line = DataFile(data_key, encoder.item_count, encoder.md5_base64(), "etag")
    (root / folder / "manifest-files.json").write_bytes(files_manifest([line]))
    if finished:
        facts = ExportFacts(
            export_id=export_id, table_arn="arn:aws:dynamodb:us-east-1:123456789012:table/Orders", table_id=None,
            s3_bucket=None, s3_prefix=None, manifest_files_key=folder + "manifest-files.json", start_time=MOMENT,
            end_time=MOMENT, item_count=len(ITEMS), billed_size_bytes=1,
            table_creation=table_creation_parameters("Orders", [("pk", "HASH")], {"pk": "S"}, "PAY_PER_REQUEST"),
        )  # fmt: skip
        (root / folder / SUMMARY_FILE_NAME).write_bytes(summary_document(facts))
    return folder


def test_the_one_finished_export_is_read_with_its_files_at_their_local_paths(tmp_path):
    folder = write_local_export(tmp_path, "01714557605000-abcdef12")

    manifests = read_written_export(ExportFolder(None, str(tmp_path)))

    assert manifests.summary.item_count == len(ITEMS)
    assert [f.data_file_s3_key for f in manifests.files] == [str(tmp_path / folder / data_file_name(0))]
    task = FileTask(None, None, manifests.files[0], manifests.summary.output_format, 1, 1)
    with local_copy(task) as data:
        assert list(read_items(task.data_file, data, DYNAMODB_JSON)) == ITEMS


@pytest.mark.parametrize(
    ("exports", "expected"),
    [
        ([], "holds no export: nothing was compared"),
        ([("01714557605000-abcdef12", False)], "holds only an unfinished export (AWSDynamoDB/01714557605000-abcdef12/"),
        ([("01714557605000-abcdef12", True), ("01714557609000-12345678", True)], "holds 2 finished exports"),
    ],
)
def test_a_folder_without_exactly_one_finished_export_is_refused(tmp_path, exports, expected):
    for export_id, finished in exports:
        write_local_export(tmp_path, export_id, finished)

    with pytest.raises(ExportPathError) as raised:
        read_written_export(ExportFolder(None, str(tmp_path)))

    assert expected in str(raised.value) and raised.value.exit_code == 2


def test_a_data_file_gone_from_the_folder_is_refused_before_reading(tmp_path):
    folder = write_local_export(tmp_path, "01714557605000-abcdef12")
    (tmp_path / folder / data_file_name(0)).unlink()

    with pytest.raises(ExportPathError, match="1 of the 1 data files its manifest lists are missing"):
        read_written_export(ExportFolder(None, str(tmp_path)))


def test_a_local_data_file_whose_bytes_changed_is_refused_by_its_md5(tmp_path):
    write_local_export(tmp_path, "01714557605000-abcdef12")
    manifests = read_written_export(ExportFolder(None, str(tmp_path)))
    path = Path(manifests.files[0].data_file_s3_key)
    body = path.read_bytes()
    path.write_bytes(body[:10] + bytes([body[10] ^ 0xFF]) + body[11:])  # one byte flipped
    task = FileTask(None, None, manifests.files[0], DYNAMODB_JSON, 1, 1)

    with pytest.raises(ExportFileError, match="its MD5"):
        with local_copy(task):
            pass
