"""The table copy: a snapshot of the source written to the target, resumable unit by unit.

Three kinds of copy, each checked by a `preflight` before anything is written:
- a live table into a table, a scan segment at a time: `table_copy` on the driver,
  `segment_copy` on the executors;
- an S3 export's data files into a table: `export_import` on the driver, `export_copy` on the
  executors;
- a live table written as an S3 export: `export_write` on the driver, `segment_export` on the
  executors, `export_pieces` for folders only the driver can write.
Shared by all three: `runner` runs units as Spark jobs, knowing no particular kind;
`outcomes` is what a unit's task returns; `progress` counts them; `savepoints` records each
finished unit (stored by `savepoint_folders`); `prune` deletes from the target what the source no
longer holds after a restart's re-copy.
"""
