"""Where savepoints are kept (`savepoints.path`): a local directory, S3, or any Hadoop filesystem.

On EMR's transient clusters the local disk goes with the cluster, so a resumable run keeps
its savepoints in S3 or HDFS. Every folder writes a savepoint atomically: a reader finds
the previous file or the new one, whole, never a part, whatever stops the driver.

- local (`./savepoints`, `/abs/dir`, `file:///abs/dir`): a temporary file, fsync, rename.
- S3 (`s3://bucket/prefix`, `s3a://` too): one PutObject, which S3 makes visible whole or
  not at all; boto3 with `savepoints.region`, `endpoint` and `credentials` (else the
  default chain and region, as on EMR).
- any other Hadoop filesystem URI (`hdfs://`, `viewfs://`, `gs://`, `abfs://`, ...): through
  the driver JVM's Hadoop client, the one Spark's checkpoints use, so it needs a Spark session
  (started before the savepoint is read; still before anything is written); written under a
  temporary name and renamed into place (`migrator.hadoop_files`).

Which schemes are accepted is decided when the config loads (`config.Savepoints`).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

from migrator import aws, hadoop_files
from migrator.aws import translated
from migrator.config import LoadedConfig, Savepoints
from migrator.connection import ClientSpec
from migrator.errors import MigratorError, ResourceNotFound, SavepointError
from migrator.snapshot.savepoints import SNAPSHOT, SavepointIdentity, SavepointStore, Side
from migrator.target.tables import TableInfo


def open_store(
    loaded: LoadedConfig, spark_factory: Callable[[], Any], source: Side, job: str = SNAPSHOT, target: Side | None = None
) -> SavepointStore:
    """The savepoint of this job (the snapshot, or the validation): named after both sides (the target
    table's unless `target` is given), in the folder savepoints.path names."""
    config = loaded.config
    identity = SavepointIdentity(source, target or table_side(config.target, "target"), job)
    return SavepointStore(open_folder(config.savepoints, spark_factory), loaded.redacted_raw, identity)


def table_side(block: Any, label: str, described: TableInfo | None = None) -> Side:
    """A table side as botocore resolves it (the environment's and profile's endpoint and region included)."""
    meta = aws.client(block.client_spec(label).for_control_plane()).meta
    kind = "alternator" if block.is_alternator else "dynamodb"
    arn = described.description.get("TableArn") if described is not None else None
    return Side(kind, meta.endpoint_url, meta.region_name, block.table, arn)


def export_side(source: Any, export_arn: str | None) -> Side:
    """An export is the same data wherever it is read from (a copy in another bucket, another endpoint):
    it is named by its id and ARN (its account), not by where S3 is reached."""
    return Side(source.type, "", "", source.table, export_arn)


def open_folder(savepoints: Savepoints, spark_factory: Callable[[], Any]) -> "LocalFolder | S3Folder | HadoopFolder":
    """The folder `savepoints.path` names; a Hadoop one starts Spark (its client lives in the driver's JVM)."""
    if savepoints.is_s3:
        return S3Folder(savepoints)
    if savepoints.is_hadoop:
        return HadoopFolder(savepoints.path, spark_factory())
    return LocalFolder(savepoints.local_path)


class LocalFolder:
    """A directory of the driver's filesystem."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def where(self, name: str = "") -> str:
        return str(self.directory / name) if name else str(self.directory)

    def check_writable(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.directory, prefix=".probe-"):
                pass
        except OSError as exc:
            raise SavepointError(
                f"savepoints.path {str(self.directory)!r} is not writable ({exc.strerror}): "
                "progress could not be saved; set savepoints.path to a writable directory"
            ) from None

    def read(self, name: str) -> str | None:
        try:
            return (self.directory / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SavepointError(f"cannot read savepoint {self.where(name)}: {exc.strerror}") from None

    def write(self, name: str, text: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, temp_path = tempfile.mkstemp(dir=self.directory, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_path, self.directory / name)
        except BaseException:
            Path(temp_path).unlink(missing_ok=True)
            raise

    def delete(self, name: str) -> None:
        (self.directory / name).unlink(missing_ok=True)


class S3Folder:
    """A prefix of an S3 bucket; each savepoint one object, replaced whole by PutObject."""

    def __init__(self, savepoints: Savepoints):
        self.bucket = savepoints.bucket
        self.prefix = savepoints.prefix
        # Saves during the copy retry as the data path does; the checks before it fail fast.
        self._spec = savepoints.client_spec("savepoints")
        self._checking = self._spec.for_control_plane()

    def where(self, name: str = "") -> str:
        return f"s3://{self.bucket}/{self._key(name)}" if name else f"s3://{self.bucket}/{self.prefix}"

    def check_writable(self) -> None:
        """Write and delete a probe object: the bucket exists and the credentials may write there."""
        probe = f".probe-{uuid.uuid4().hex[:12]}"
        try:
            self.write(probe, "", self._checking)
            self.delete(probe, self._checking)
        except MigratorError as exc:
            raise SavepointError(
                f"savepoints.path {self.where()} is not writable ({exc}): progress could not be saved; check the "
                "bucket, savepoints.region, savepoints.endpoint and savepoints.credentials (s3:PutObject, "
                "s3:GetObject, s3:DeleteObject and s3:ListBucket are needed), or set savepoints.path elsewhere"
            ) from None

    def read(self, name: str) -> str | None:
        """The object's text, or None when there is none (S3 says NoSuchKey only to s3:ListBucket holders)."""
        try:
            with translated("reading savepoint", self.where(name)):
                response = self._client(self._checking).get_object(Bucket=self.bucket, Key=self._key(name))
                return response["Body"].read().decode("utf-8")
        except ResourceNotFound as exc:
            if exc.code == "NoSuchKey":
                return None
            raise

    def write(self, name: str, text: str, spec: ClientSpec | None = None) -> None:
        with translated("writing savepoint", self.where(name)):
            self._client(spec).put_object(Bucket=self.bucket, Key=self._key(name), Body=text.encode("utf-8"))

    def delete(self, name: str, spec: ClientSpec | None = None) -> None:
        with translated("deleting savepoint", self.where(name)):
            self._client(spec).delete_object(Bucket=self.bucket, Key=self._key(name))

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _client(self, spec: ClientSpec | None = None) -> Any:
        return aws.client(spec or self._spec, "s3")


class HadoopFolder:
    """A folder of a Hadoop filesystem, written by the driver's JVM (as Spark writes its checkpoints)."""

    def __init__(self, uri: str, spark: Any):
        from py4j.protocol import Py4JJavaError

        self._java_error = Py4JJavaError
        self.uri = uri.rstrip("/")
        self._path_class = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
        self._io = spark.sparkContext._jvm.org.apache.commons.io.IOUtils
        try:
            self._fs = self._path(self.uri).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        except Py4JJavaError as exc:  # no FileSystem for the scheme, a malformed URI
            raise SavepointError(
                f"savepoints.path {uri}: Hadoop cannot open it ({hadoop_files.java_reason(exc)}): check savepoints.path, and "
                "that this cluster's Hadoop configuration reaches that filesystem, or use a local directory or s3://"
            ) from None

    def where(self, name: str = "") -> str:
        return f"{self.uri}/{name}" if name else self.uri

    def check_writable(self) -> None:
        probe = f".probe-{uuid.uuid4().hex[:12]}"
        try:
            self._create(self._path(self.where(probe)), "")
            self._fs.delete(self._path(self.where(probe)), False)
        except self._java_error as exc:
            raise SavepointError(
                f"savepoints.path {self.uri} is not writable ({hadoop_files.java_reason(exc)}): progress could not be saved; "
                "set savepoints.path to a folder this user may write"
            ) from None

    def read(self, name: str) -> str | None:
        try:
            path = hadoop_files.readable(self._fs, self._path(self.where(name)))
            return None if path is None else self._read(path)
        except self._java_error as exc:
            raise SavepointError(f"cannot read savepoint {self.where(name)}: {hadoop_files.java_reason(exc)}") from None

    def write(self, name: str, text: str) -> None:
        """Raises OSError with Hadoop's reason, as a local folder's write does: the copy stops (rerun to resume)."""
        try:
            hadoop_files.write_atomically(self._fs, self._path(self.where(name)), text)
        except self._java_error as exc:
            raise OSError(f"cannot write savepoint {self.where(name)}: {hadoop_files.java_reason(exc)}") from None

    def delete(self, name: str) -> None:
        hadoop_files.delete(self._fs, self._path(self.where(name)))

    def _create(self, path: Any, text: str) -> None:
        stream = self._fs.create(path, True)
        try:
            stream.write(text.encode("utf-8"))
        finally:
            stream.close()

    def _read(self, path: Any) -> str:
        stream = self._fs.open(path)
        try:
            return self._io.toString(stream, "UTF-8")
        finally:
            stream.close()

    def _path(self, uri: str) -> Any:
        return self._path_class(uri)
