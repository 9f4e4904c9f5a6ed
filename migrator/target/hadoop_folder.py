"""An export folder on a Hadoop filesystem (hdfs://, viewfs://, ...), written by the driver.

Executors are Python workers with no JVM of their own, so they cannot reach a Hadoop
filesystem. The driver can: its JVM holds the cluster's Hadoop client and configuration
(core-site.xml, hdfs-site.xml, `spark.hadoop.*`), as Spark's own checkpoints use them
(`migrator.replicate.checkpoint`). So for such a folder the driver does every write: `_started`, each
data file an executor encoded and handed back (`export_pieces`), the manifests. Any scheme
the cluster's Hadoop has a FileSystem for works; nothing beyond Spark's jars is needed for
HDFS.

A file is written under a hidden temporary name and renamed into place, so a file under its
final name is whole, as for a local folder. The validator keeps its work files in such a folder
too (`migrator.validate.buckets`): it also reads them back and deletes the whole folder.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from migrator.errors import ExportExists, ExportPathError
from migrator.hadoop_files import java_reason
from migrator.export.manifest import SUMMARY_FILE_NAME
from migrator.export.output import EXPORTS_FOLDER
from migrator.target.export_folder import FOLDERS_CHECKED, ExportFolder

WRITE_SLICE_BYTES = 1 << 20  # bytes per call into the JVM: py4j sends each call's bytes as one text message


class HadoopFolder:
    """The export folder (target.path), seen through Hadoop's FileSystem in the driver's JVM."""

    def __init__(self, spark: SparkSession, folder: ExportFolder):
        self.folder = folder
        self._path_class = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
        self._io = spark.sparkContext._jvm.org.apache.commons.io.IOUtils
        try:
            self._fs = self._path(folder.root).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        except Py4JJavaError as exc:  # no FileSystem for the scheme, a malformed URI
            raise ExportPathError(folder.where(), f"Hadoop cannot open it ({java_reason(exc)}){_FIX}") from None

    def refuse_existing(self) -> None:
        """Refuse a folder that holds an export, finished or not, is a file, or cannot be reached."""
        try:
            folders, finished = self._existing_exports()
        except Py4JJavaError as exc:  # the namenode unreachable, permissions
            raise ExportPathError(
                self.folder.where(), f"cannot list {self.folder.where(EXPORTS_FOLDER)} ({java_reason(exc)}){_FIX}"
            ) from None
        if folders:
            raise ExportExists(self.folder.where(), [self.folder.where(name) for name in folders], finished)

    def write(self, relative: str, data: bytes) -> str:
        """Write one whole file; returns its ETag as a local folder's: the hex MD5 of its bytes.

        Raises OSError (as a local folder's writes do) with Hadoop's reason when it refuses or fails.
        """
        final = self._path(self.folder.where(relative))
        temporary = self._path(final.getParent(), f".{final.getName()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            self._write_whole(temporary, data)
            self._move(temporary, final, len(data))
        except (Py4JJavaError, OSError) as exc:
            self._drop(temporary)
            raise OSError(java_reason(exc) if isinstance(exc, Py4JJavaError) else str(exc)) from None
        return hashlib.md5(data).hexdigest()

    def delete(self, relative: str) -> None:
        """Delete a file if it is there (a data file an earlier attempt of a segment left)."""
        try:
            self._fs.delete(self._path(self.folder.where(relative)), False)
        except Py4JJavaError as exc:
            raise OSError(f"deleting {self.folder.where(relative)}: {java_reason(exc)}") from None

    def read_range(self, relative: str, start: int, length: int) -> bytes | None:
        """`length` bytes of a file from `start` (a seek, as Hadoop streams allow); None when it is not there;
        OSError with Hadoop's reason when it fails, or ends before `start + length`."""
        path = self._path(self.folder.where(relative))
        try:
            if not self._fs.exists(path):
                return None
            stream = self._fs.open(path)
            try:
                stream.seek(start)
                return bytes(self._io.toByteArray(stream, length))
            finally:
                stream.close()
        except Py4JJavaError as exc:
            raise OSError(f"reading {self.folder.where(relative)}: {java_reason(exc)}") from None

    def delete_folder(self) -> None:
        """Delete the folder and everything under it; nothing when it is not there."""
        try:
            self._fs.delete(self._path(self.folder.root), True)
        except Py4JJavaError as exc:
            raise OSError(f"deleting {self.folder.where()}: {java_reason(exc)}") from None

    def _existing_exports(self) -> tuple[list[str], bool]:
        """The export folders (`AWSDynamoDB/<id>/`) under the folder, and whether any is finished."""
        root = self._path(self.folder.root)
        if self._fs.exists(root) and self._fs.getFileStatus(root).isFile():
            raise ExportPathError(self.folder.where(), "is a file, not a directory: set target.path to a directory")
        exports = self._path(self.folder.where(EXPORTS_FOLDER))
        if not self._fs.exists(exports):
            return [], False
        entries = sorted(self._fs.listStatus(exports), key=lambda status: status.getPath().getName())
        names = [f"{EXPORTS_FOLDER}{s.getPath().getName()}{'/' if s.isDirectory() else ''}" for s in entries]
        finished = any(
            self._fs.exists(self._path(self.folder.where(name + SUMMARY_FILE_NAME))) for name in names[:FOLDERS_CHECKED]
        )
        return names, finished

    def _write_whole(self, path: Any, data: bytes) -> None:
        stream = self._fs.create(path, False)  # parent folders are made as needed
        try:
            for start in range(0, len(data), WRITE_SLICE_BYTES):
                stream.write(data[start:start + WRITE_SLICE_BYTES])
        finally:
            stream.close()

    def _move(self, temporary: Any, final: Any, size: int) -> None:
        """Rename into place (HDFS's rename does not replace: a retried file's old copy goes first)."""
        self._fs.delete(final, False)
        if not self._fs.rename(temporary, final):
            raise OSError("Hadoop refused to rename the temporary file into place")
        written = self._fs.getFileStatus(final).getLen()
        if written != size:
            raise OSError(f"it holds {written} bytes after {size} were written")

    def _drop(self, temporary: Any) -> None:
        try:
            self._fs.delete(temporary, False)
        except Py4JJavaError:  # the failure being reported matters more than the leftover
            pass

    def _path(self, *parts: Any) -> Any:
        return self._path_class(*parts)


_FIX = ": check target.path, and that this cluster's Hadoop configuration reaches that filesystem"


