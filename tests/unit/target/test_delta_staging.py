"""MERGE rows staged as Parquet files beside a Delta table, then read back as one stream
(`migrator.target.delta_staging`), on a local directory; the emulator's S3 is in tests/integration/test_delta_incremental.py."""

from __future__ import annotations

import pyarrow as pa

from migrator.target.delta import DeltaLocation
from migrator.target.delta_staging import STAGING_FOLDER, StagedFile, new_staging, stage, staged_rows

SCHEMA = pa.schema([pa.field("pk", pa.string(), nullable=False), pa.field("_item", pa.string())])


def batch(*keys: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"pk": list(keys), "_item": [f"item {key}" for key in keys]}, schema=SCHEMA)


def test_staged_files_are_read_back_as_one_stream_of_only_the_listed_files(tmp_path):
    area = new_staging(DeltaLocation(str(tmp_path)), "copy-changes")
    first = stage(area, "part-00000-attempt-0.parquet", SCHEMA, [batch("a", "b"), batch("c")])
    stage(area, "part-00001-attempt-0.parquet", SCHEMA, [batch("lost")])  # a failed attempt's: never returned
    retried = stage(area, "part-00001-attempt-1.parquet", SCHEMA, [batch("d")])

    reader = staged_rows(area, [first, retried], SCHEMA)

    assert isinstance(reader, pa.RecordBatchReader) and reader.schema == SCHEMA
    assert sorted(reader.read_all().column("pk").to_pylist()) == ["a", "b", "c", "d"]
    assert (first, retried) == (StagedFile(f"{area.folder}/part-00000-attempt-0.parquet", 3),
                                StagedFile(f"{area.folder}/part-00001-attempt-1.parquet", 1))  # fmt: skip


def test_the_staging_folder_is_underscored_beside_the_table_and_new_for_each_run(tmp_path):
    location = DeltaLocation(str(tmp_path))
    area, rerun = new_staging(location, "copy-changes"), new_staging(location, "copy-changes")

    stage(area, "part-00000-attempt-0.parquet", SCHEMA, [batch("a")])

    assert area.folder.startswith(f"{STAGING_FOLDER}/copy-changes/") and rerun.folder != area.folder
    assert (tmp_path / area.folder / "part-00000-attempt-0.parquet").is_file()
    assert area.uri() == f"{tmp_path}/{area.folder}"


def test_a_partition_without_rows_stages_no_file(tmp_path):
    area = new_staging(DeltaLocation(str(tmp_path)), "copy-changes")

    assert stage(area, "part-00000-attempt-0.parquet", SCHEMA, []) is None
    assert stage(area, "part-00001-attempt-0.parquet", SCHEMA, [batch()]) is None
    assert not (tmp_path / STAGING_FOLDER).exists()
