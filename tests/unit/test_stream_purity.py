"""The stream models stay pure: importing them loads neither pyspark nor boto3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stream_modules_import_neither_spark_nor_aws_clients():
    probe = (
        "import sys\n"
        "import migrator.stream.shards, migrator.stream.records, migrator.stream.collapse, migrator.stream.offsets\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'pyspark', 'boto3', 'botocore', 'py4j'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"
