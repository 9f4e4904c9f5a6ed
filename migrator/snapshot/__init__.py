"""The table copy: a snapshot of the source written to the target, resumable unit by unit.

The kinds of copy: scan segments of a live table (`segment_copy`), the data files of an S3 export
imported into a table (`export_import`, executors' work in `export_copy`), and a table written as
an S3 export (`export_write`, `segment_export`, `export_pieces`). `runner` runs the units of any
kind as Spark jobs and records each finished one in the savepoint (`savepoints`, stored by
`savepoint_folders`); `progress` and `export_progress` report them; `prune` deletes from the target
what the source no longer holds after a restart.
"""
