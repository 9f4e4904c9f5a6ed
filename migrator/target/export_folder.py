"""Where an S3 export is written: a local directory, an S3 bucket and prefix, or a Hadoop filesystem
URI, and how bytes get there.

The driver checks that the folder holds no export yet (`refuse_existing`), then writes
`_started` and, at the end, the two manifests (`write_object`). Each executor streams its data
file in with `open_data_file`: to S3 with one PutObject, or a multipart upload once the file
passes PART_BYTES, so a file is never held whole in memory; to a local directory under a
temporary name, renamed when complete. Either way a data file under its final name is whole,
and a retried segment replaces its file.

A local directory must be one filesystem for the driver and every executor (local mode, or a
shared mount on a cluster); the driver checks each data file is there before writing the manifests.

The validator keeps its work files in such a folder too (`migrator.validate.buckets`): it also
reads ranges of files back (`read_range`) and deletes the whole folder when done (`delete_folder`).

A Hadoop filesystem (hdfs://...) is reachable only through the driver's JVM: executors are
Python workers without one. There `open_data_file` keeps the file's bytes, bounded by the
export's file size limit (`export_pieces`), and the executor hands them back to the driver,
which writes them and the rest with `hadoop_folder.HadoopFolder`.

The validator reads a finished export back from a local or S3 folder (`read_written_export`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from migrator import aws
from migrator.aws import translated
from migrator.config import S3ExportTarget
from migrator.connection import ClientSpec
from migrator.errors import ExportExists, ExportPathError, ResourceNotFound
from migrator.export.errors import ExportManifestError
from migrator.export.manifest import SUMMARY_FILE_NAME
from migrator.export.output import EXPORTS_FOLDER
from migrator.source.s3export import ExportManifests, check_files_present, manifests_read_by, read_manifests

PART_BYTES = 8 * 1024 * 1024  # S3 parts are 5 MiB to 5 GiB, except the last
PARTS_PER_SIZE_STEP = 1000  # S3 allows 10,000 parts: grow the part size every 1,000 to stay far below
FOLDERS_CHECKED = 10  # existing export folders checked for a summary, for the refusal's wording


@dataclass(frozen=True)
class ExportFolder:
    """The folder exports go under (target.path); plain values, so executors receive it in their task."""

    bucket: str | None  # None: a local directory or a Hadoop filesystem
    root: str  # S3: the key prefix, "" or "a/b"; local: the directory, absolute; Hadoop: the URI as given
    s3: ClientSpec | None = None
    hadoop: bool = False  # root is a Hadoop filesystem URI (hdfs://...), written by the driver

    @classmethod
    def of(cls, target: S3ExportTarget) -> "ExportFolder":
        if target.is_s3:
            return cls(target.bucket, target.prefix, target.client_spec("target"))
        if target.is_hadoop:
            return cls(None, target.prefix, hadoop=True)
        return cls(None, os.path.abspath(os.path.expanduser(target.prefix)))

    @property
    def is_s3(self) -> bool:
        return self.bucket is not None

    @property
    def is_local(self) -> bool:
        return not self.is_s3 and not self.hadoop

    def key(self, relative: str) -> str:
        """The key manifests name a file by: S3's key, or, locally, the path under the folder."""
        if self.is_s3 and self.root:
            return f"{self.root}/{relative}"
        return relative

    def where(self, relative: str = "") -> str:
        """The file or folder for people: s3://bucket/key, a local path, or the Hadoop URI."""
        if self.is_s3:
            return f"s3://{self.bucket}/{self.key(relative)}"
        if self.hadoop:
            return _join_uri(self.root, relative)
        return os.path.join(self.root, relative) if relative else self.root

    def control_plane(self) -> "ExportFolder":
        """The same folder with the driver's fail-fast client settings."""
        return ExportFolder(self.bucket, self.root, self.s3.for_control_plane() if self.s3 else None, self.hadoop)


def _join_uri(root: str, relative: str) -> str:
    """`hdfs://nn/exports` + `a/b`: joined with one "/", whatever the driver's OS (not os.path.join)."""
    if not relative:
        return root
    return (root if root.endswith("/") else root + "/") + relative


def refuse_existing(folder: ExportFolder) -> None:
    """Refuse a folder that already holds an export, finished or not, or that cannot be written to.

    Local and S3 folders only: a Hadoop folder is checked by `HadoopFolder.refuse_existing`,
    once the driver's JVM runs.
    """
    folders, finished = _existing_exports(folder)
    if folders:
        raise ExportExists(folder.where(), [folder.where(name) for name in folders], finished)
    if not folder.is_s3:
        _check_local_directory(folder)


def read_written_export(folder: ExportFolder) -> ExportManifests:
    """The manifests of the one finished export under the folder (local or S3), every data file checked present.

    For the validator, which reads back what `target.path` holds. A local folder's data files are
    named by their path on this machine (one filesystem for the driver and every executor, as
    when the export was written).
    """
    summary_key = folder.key(_finished_export(folder) + SUMMARY_FILE_NAME)
    if folder.is_s3:
        client = aws.client(folder.s3, "s3")
        manifests = read_manifests(client, folder.bucket, summary_key, folder.s3.where)
        check_files_present(client, folder.bucket, manifests.files)
        return manifests
    manifests = manifests_read_by(partial(_local_bytes, folder), summary_key)
    files = tuple(replace(f, data_file_s3_key=folder.where(f.data_file_s3_key)) for f in manifests.files)
    missing = [f.data_file_s3_key for f in files if not os.path.isfile(f.data_file_s3_key)]
    if missing:
        raise ExportPathError(
            folder.where(), f"{len(missing)} of the {len(files)} data files its manifest lists are missing "
            f"(first {missing[0]}): write the export again",
        )  # fmt: skip
    return replace(manifests, files=files)


def _finished_export(folder: ExportFolder) -> str:
    """The folder's one finished export (`AWSDynamoDB/<id>/`): never a guess among several, nor an unfinished one."""
    names, _ = _existing_exports(folder)
    finished = [name for name in names if _has_summary(folder, name)]
    if len(finished) == 1:
        return finished[0]
    if finished:
        raise ExportPathError(
            folder.where(), f"holds {len(finished)} finished exports ({', '.join(finished[:3])}): the "
            "validator compares the source with one; move the others to another folder",
        )  # fmt: skip
    state = f"only an unfinished export ({names[0]}, no {SUMMARY_FILE_NAME})" if names else "no export"
    raise ExportPathError(
        folder.where(), f"holds {state}: nothing was compared; run the migration to write the export, "
        "or set target.path to the folder it was written to",
    )  # fmt: skip


def _has_summary(folder: ExportFolder, name: str) -> bool:
    if folder.is_s3:
        return _s3_object_exists(aws.client(folder.s3, "s3"), folder, name + SUMMARY_FILE_NAME)
    return (Path(folder.root) / name / SUMMARY_FILE_NAME).is_file()


def _local_bytes(folder: ExportFolder, relative: str) -> bytes:
    try:
        return Path(folder.where(relative)).read_bytes()
    except OSError as exc:
        raise ExportManifestError(folder.where(relative), f"cannot be read ({exc.strerror or exc})") from None


def write_object(folder: ExportFolder, relative: str, data: bytes) -> str:
    """Write one whole file (`_started`, a manifest); returns its ETag (S3's, or the MD5 S3 would give)."""
    with open_data_file(folder, relative) as sink:
        sink.write(data)
    return sink.etag


@contextmanager
def open_data_file(folder: ExportFolder, relative: str) -> Iterator["_LocalFile | _S3Upload | _HandedBack"]:
    """A writable file that appears under its name only when the block ends without an error.

    After the block, the sink's `etag` is S3's ETag (a local file gets the hex MD5 of its bytes,
    what a single PutObject would give), and its `data` the bytes the driver is to write (a
    Hadoop folder), else None.
    """
    sink = _S3Upload(folder, relative) if folder.is_s3 else _HandedBack() if folder.hadoop else _LocalFile(folder, relative)
    try:
        yield sink
    except BaseException:
        sink.abort()
        raise
    sink.commit()


def read_range(folder: ExportFolder, relative: str, start: int, length: int) -> bytes | None:
    """`length` bytes of a file (local or S3) from `start`, fewer when it ends sooner; None when it is not there."""
    if not folder.is_s3:
        try:
            with open(folder.where(relative), "rb") as handle:
                handle.seek(start)
                return handle.read(length)
        except FileNotFoundError:
            return None
    try:
        with translated("reading", folder.where(relative)):
            response = aws.client(folder.s3, "s3").get_object(
                Bucket=folder.bucket, Key=folder.key(relative), Range=f"bytes={start}-{start + length - 1}"
            )
            return response["Body"].read()
    except ResourceNotFound as exc:
        if exc.code == "NoSuchKey":
            return None
        raise


def delete_folder(folder: ExportFolder) -> None:
    """Delete the folder and every file under it (local or S3); nothing when it is not there."""
    if not folder.is_s3:
        shutil.rmtree(folder.root, ignore_errors=True)
        return
    client = aws.client(folder.s3, "s3")
    prefix = folder.key("")
    prefix = prefix if prefix.endswith("/") or not prefix else prefix + "/"
    with translated("deleting", folder.where()):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=folder.bucket, Prefix=prefix):
            keys = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
            if keys:  # at most 1,000 a page: DeleteObjects' own limit
                client.delete_objects(Bucket=folder.bucket, Delete={"Objects": keys, "Quiet": True})


def local_size_bytes(folder: ExportFolder, relative: str) -> int | None:
    """The size of a file in a local folder, or None when it is not there."""
    try:
        return os.path.getsize(folder.where(relative))
    except OSError:
        return None


def _existing_exports(folder: ExportFolder) -> tuple[list[str], bool]:
    """The export folders (`AWSDynamoDB/<id>/`) under the folder, and whether any is finished."""
    if not folder.is_s3:
        exports = Path(folder.root) / EXPORTS_FOLDER
        entries = sorted(exports.iterdir()) if exports.is_dir() else []
        names = [f"{EXPORTS_FOLDER}{p.name}{'/' if p.is_dir() else ''}" for p in entries]
        finished = any((Path(folder.root) / name / SUMMARY_FILE_NAME).exists() for name in names)
        return names, finished
    client = aws.client(folder.s3, "s3")
    prefix = folder.key(EXPORTS_FOLDER)
    names: list[str] = []
    try:
        with translated("listing the exports in", folder.where(EXPORTS_FOLDER)):
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=folder.bucket, Prefix=prefix, Delimiter="/"
            ):
                found = [p["Prefix"] for p in page.get("CommonPrefixes", [])] + [c["Key"] for c in page.get("Contents", [])]
                names += [EXPORTS_FOLDER + key[len(prefix):] for key in found]
    except ResourceNotFound as exc:
        if exc.code == "NoSuchBucket":
            raise ExportPathError(
                folder.where(), f"bucket {folder.bucket!r} does not exist at {folder.s3.where}: create it, "
                "or check target.path, target.region and target.endpoint",
            ) from None  # fmt: skip
        raise
    finished = any(_s3_object_exists(client, folder, name + SUMMARY_FILE_NAME) for name in names[:FOLDERS_CHECKED])
    return names, finished


def _s3_object_exists(client: Any, folder: ExportFolder, relative: str) -> bool:
    """A listing, not HeadObject: a missing key's HEAD answer is a bare 404, and listing is already needed."""
    key = folder.key(relative)
    with translated("listing", folder.where(relative)):
        listed = client.list_objects_v2(Bucket=folder.bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    return any(entry["Key"] == key for entry in listed)


def _check_local_directory(folder: ExportFolder) -> None:
    """The directory, or the nearest parent that exists, is a directory this process may write to."""
    existing = Path(folder.root)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ExportPathError(folder.where(), f"{existing} is a file, not a directory: set target.path to a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ExportPathError(
            folder.where(), f"{existing} is not writable by this user: set target.path to a writable directory"
        )


class _HandedBack:
    """A file of a Hadoop folder, kept in memory for the driver to write (executors cannot reach Hadoop)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.data: bytes | None = None
        self.etag = ""

    def write(self, data: bytes) -> int:
        self._buffer += data
        return len(data)

    def commit(self) -> None:
        self.data = bytes(self._buffer)
        self._buffer = bytearray()
        self.etag = hashlib.md5(self.data).hexdigest()

    def abort(self) -> None:
        self._buffer = bytearray()


class _LocalFile:
    """A file in a local folder, written under a temporary name and renamed into place on commit."""

    data = None  # written here, not handed back

    def __init__(self, folder: ExportFolder, relative: str):
        self._final = Path(folder.where(relative))
        self._final.parent.mkdir(parents=True, exist_ok=True)
        self._temporary = self._final.with_name(f".{self._final.name}.{uuid.uuid4().hex[:8]}.tmp")
        self._handle = open(self._temporary, "wb")
        self._md5 = hashlib.md5()
        self.etag = ""

    def write(self, data: bytes) -> int:
        self._md5.update(data)
        return self._handle.write(data)

    def commit(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self._temporary, self._final)
        self.etag = self._md5.hexdigest()

    def abort(self) -> None:
        self._handle.close()
        self._temporary.unlink(missing_ok=True)


class _S3Upload:
    """An S3 object written as it comes: one PutObject when small, else a multipart upload."""

    data = None  # uploaded here, not handed back

    def __init__(self, folder: ExportFolder, relative: str):
        self._client = aws.client(folder.s3, "s3")
        self._bucket = folder.bucket
        self._key = folder.key(relative)
        self._where = folder.where(relative)
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self.etag = ""

    def write(self, data: bytes) -> int:
        self._buffer += data
        part_bytes = PART_BYTES * (1 + len(self._parts) // PARTS_PER_SIZE_STEP)
        if len(self._buffer) >= part_bytes:
            self._upload_part()
        return len(data)

    def commit(self) -> None:
        with translated("writing", self._where):
            if self._upload_id is None:
                response = self._client.put_object(Bucket=self._bucket, Key=self._key, Body=bytes(self._buffer))
            else:
                if self._buffer:
                    self._upload_part()
                response = self._client.complete_multipart_upload(
                    Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},
                )  # fmt: skip
        self.etag = response["ETag"].strip('"')

    def abort(self) -> None:
        """Drop an unfinished multipart upload, so S3 keeps (and bills) none of its parts; best effort."""
        if self._upload_id is None:
            return
        try:
            self._client.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
        except Exception:  # the failure being reported matters more; S3 lifecycle rules clean up the rest
            pass

    def _upload_part(self) -> None:
        with translated("writing", self._where):
            if self._upload_id is None:
                self._upload_id = self._client.create_multipart_upload(Bucket=self._bucket, Key=self._key)["UploadId"]
            number = len(self._parts) + 1
            response = self._client.upload_part(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number, Body=bytes(self._buffer)
            )
        self._parts.append({"PartNumber": number, "ETag": response["ETag"]})
        self._buffer.clear()
