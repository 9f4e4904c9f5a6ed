"""The validator: does the target hold exactly what the source holds, key by key, in both directions?

`compare` is the pure equality of two items; `report` adds up what the executors found and
renders it; `matching` runs on executors (scan both sides, join by key, classify, repair);
`driver` checks the input, plans, runs the Spark job and writes the report. This package's
`__init__` imports nothing, so the pure parts load without pyspark or boto3.
"""
