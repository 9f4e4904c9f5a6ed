"""DynamoDB S3 exports, read without Spark or AWS clients: manifests, data files, incremental changes.

`manifest` parses `manifest-summary.json` and `manifest-files.json`; `decode` turns one gzip
data file (DYNAMODB_JSON or ION) into items or incremental records in DynamoDB JSON wire
form, checking its MD5 and item count; `ion_text` reads the Ion text that exports write;
`incremental` keeps the newest write of each key across files and exports; `plan` spreads
an import over the cluster; `errors` holds the errors a missing or damaged export raises.
None of these import pyspark or boto3: the S3 reads are in `migrator.source.s3export`, the
executors' work in `migrator.snapshot.export_copy` and the driver's in `migrator.snapshot.export_import`.

The files' format: "DynamoDB table export output format", Amazon DynamoDB Developer Guide,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html
"""
