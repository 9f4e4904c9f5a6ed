"""HDFS on the local disk: Hadoop settings that make hdfs:///a/b the local /a/b, and such a URI."""

from __future__ import annotations

from pathlib import Path


HDFS_ON_LOCAL_DISK = {
    "fs.hdfs.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
    "fs.viewfs.mounttable.default.linkFallback": "file:///",  # hdfs:///a/b is /a/b on this machine
    "fs.hdfs.impl.disable.cache": "true",  # no FileSystem cached for hdfs outlives the test
}


def hdfs_uri(local: Path) -> str:
    return f"hdfs://{local}"  # local is absolute: hdfs:///tmp/...
