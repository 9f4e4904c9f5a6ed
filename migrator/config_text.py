"""The config file's text, wherever `--config` points: a local path, S3, or any Hadoop filesystem.

An EMR step then needs no copy step: `--config s3://bucket/orders.yaml`. Read on the driver
before anything else: `s3://` and `s3a://` through the client factory (the driver's default
credential chain and region, and `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` as boto3 reads
them); another scheme (`hdfs://`, `gs://`, `abfs://`...) through Hadoop in the JVM that
spark-submit started, with the Hadoop settings the Spark session will have.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from migrator import aws
from migrator.connection import ClientSpec
from migrator.errors import ConfigError, MigratorError

S3_SCHEMES = ("s3", "s3a")
MAX_CONFIG_BYTES = 1 << 20  # a config is a few KB: a larger object is the wrong one


def read_config_text(location: str) -> str:
    """The text at `location`; ConfigError naming the location and the cause when it cannot be read."""
    scheme = urlparse(location).scheme
    if scheme in S3_SCHEMES:
        return _read_s3(location)
    if "://" in location and scheme != "file":
        return _read_hadoop(location)
    path = location.removeprefix("file://")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError("", f"cannot read the config file: {exc.strerror}", location) from None
    return _decoded(data, location)


def _read_s3(location: str) -> str:
    parsed = urlparse(location)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key:
        raise ConfigError("", "cannot read the config file: an S3 location is s3://bucket/key.yaml", location)
    spec = ClientSpec("config file").for_control_plane()
    try:
        with aws.translated("reading the config file", location):
            response = aws.client(spec, "s3").get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{MAX_CONFIG_BYTES}")  # one byte more than allowed
            return _decoded(response["Body"].read(), location)
    except ConfigError:
        raise
    except MigratorError as exc:
        raise ConfigError(
            "", f"cannot read the config file: {exc}; check the location and that the driver's credentials "
            "may s3:GetObject it", location,
        ) from None  # fmt: skip


def _read_hadoop(location: str) -> str:
    from py4j.protocol import Py4JJavaError  # pyspark is imported only for such a location

    jvm = _jvm()
    try:
        path = jvm.org.apache.hadoop.fs.Path(location)
        settings = jvm.org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(jvm.org.apache.spark.SparkConf())
        stream = path.getFileSystem(settings).open(path)
        try:
            data = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()
    except Py4JJavaError as exc:
        from migrator.hadoop_files import java_reason

        raise ConfigError(
            "", f"cannot read the config file through Hadoop: {java_reason(exc)}; check the location, and that "
            "this cluster's Hadoop configuration reaches that filesystem", location,
        ) from None  # fmt: skip
    return _decoded(data, location)


def _jvm() -> Any:
    """The JVM spark-submit started (or a new one, which the Spark session then reuses)."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    return SparkContext._jvm


def _decoded(data: bytes, location: str) -> str:
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError("", f"cannot read the config file: larger than {MAX_CONFIG_BYTES:,} bytes", location)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("", "cannot read the config file: not UTF-8 text", location) from None
