"""An export's segments in pieces, for a Hadoop folder the driver writes (`migrator.snapshot.export_pieces`).

No Spark and no network: the Spark job of each piece and the Hadoop folder are stand-ins
recording what they were asked; the Scan's resumption is checked on `scan_segment` with a
client that serves pages.
"""

from __future__ import annotations

import threading

from migrator.snapshot import export_pieces
from migrator.connection import ClientSpec
from migrator.errors import SegmentExportFailed
from migrator.export.manifest import DataFile
from migrator.snapshot.export_pieces import SegmentPieces
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.outcomes import SegmentFileOutcome
from migrator.snapshot.segment_export import SegmentFileTask
from migrator.snapshot.runner import UnitJobs
from migrator.source.scan import ScanCounters, scan_segment
from migrator.target.export_folder import ExportFolder

FOLDER = ExportFolder(None, "hdfs://nn/exports", hadoop=True)
EXPORT_DIR = "AWSDynamoDB/01714557600000-abcdef12/"
TASK = SegmentFileTask(source=ClientSpec("source"), source_table="Orders", folder=FOLDER,
                       data_file=EXPORT_DIR + "data/segment-000002.json.gz", segment=2, total_segments=4)  # fmt: skip


class Pages:
    """A DynamoDB client whose Scan serves fixed pages, recording each request."""

    def __init__(self, pages: list[list[dict]]):
        self.pages, self.requests = pages, []

    def scan(self, **request):
        self.requests.append(request)
        index = int(request["ExclusiveStartKey"]["pk"]["S"]) if "ExclusiveStartKey" in request else 0
        response = {"Items": self.pages[index]}
        if index + 1 < len(self.pages):
            response["LastEvaluatedKey"] = {"pk": {"S": str(index + 1)}}
        return response


def test_a_scan_tells_where_to_resume_and_resumes_there():
    client = Pages([[{"pk": {"S": "a"}}], [{"pk": {"S": "b"}}], [{"pk": {"S": "c"}}]])
    counters = ScanCounters()

    first = scan_segment(client, "t", 0, 1, limiter=CapacityLimiter(None), counters=counters, report_capacity=False)
    assert next(first) == [{"pk": {"S": "a"}}] and counters.resume_key == {"pk": {"S": "1"}}

    rest = scan_segment(client, "t", 0, 1, limiter=CapacityLimiter(None), counters=counters, report_capacity=False,
                        start_key=counters.resume_key)  # fmt: skip
    assert list(rest) == [[{"pk": {"S": "b"}}], [{"pk": {"S": "c"}}]]
    assert client.requests[1]["ExclusiveStartKey"] == {"pk": {"S": "1"}} and counters.resume_key is None


class HadoopStandIn:
    """Records the files the driver writes and deletes; can refuse a write."""

    def __init__(self, refuse: str | None = None):
        self.folder, self.files, self.deleted, self.refuse = FOLDER, {}, [], refuse

    def write(self, relative: str, data: bytes) -> str:
        if self.refuse and relative.endswith(self.refuse):
            raise OSError("org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: The DiskSpace quota is exceeded")
        self.files[relative] = data
        return ""

    def delete(self, relative: str) -> None:
        self.deleted.append(relative)
        self.files.pop(relative, None)


class SparkStandIn:
    class sparkContext:  # noqa: N801 - the attribute's name in PySpark
        @staticmethod
        def setJobDescription(text: str) -> None:  # noqa: N802
            pass


def piece_jobs(monkeypatch, results: list[SegmentFileOutcome]) -> list[SegmentFileTask]:
    """Each piece's Spark job returns the next of `results`; returns the tasks the jobs were given."""
    asked: list[SegmentFileTask] = []

    def run_job(spark, task, jobs):
        asked.append(task)
        return results[len(asked) - 1]

    monkeypatch.setattr(export_pieces, "run_job", run_job)
    return asked


def piece(items: int, data: bytes, resume: str | None, **extra) -> SegmentFileOutcome:
    return SegmentFileOutcome(segment=2, scanned=items, written=items, size_bytes=len(data), item_bytes=10 * items,
                              data_files=(DataFile("k", items, "md5", "etag"),), data=data,
                              resume_key={"pk": {"S": resume}} if resume else None, **extra)  # fmt: skip


JOBS = UnitJobs(work=lambda task: None, describe=lambda task: "export", job_failed=lambda task, cause: None)


def attempt(pieces: SegmentPieces, stop: threading.Event | None = None) -> SegmentFileOutcome:
    return pieces.attempt(SparkStandIn(), TASK, JOBS, stop or threading.Event())


def test_pieces_follow_the_scan_each_to_its_own_file_and_add_up_to_the_segment(monkeypatch):
    asked = piece_jobs(monkeypatch, [piece(3, b"one", "k1"), piece(2, b"two", "k2"), piece(0, b"", None)])
    folder = HadoopStandIn()

    outcome = attempt(SegmentPieces(folder))

    assert [t.start_key for t in asked] == [None, {"pk": {"S": "k1"}}, {"pk": {"S": "k2"}}]
    assert {t.max_file_bytes for t in asked} == {export_pieces.PIECE_BYTES}
    assert [t.data_file for t in asked] == [EXPORT_DIR + "data/segment-000002.json.gz",
                                            EXPORT_DIR + "data/segment-000002-000001.json.gz",
                                            EXPORT_DIR + "data/segment-000002-000002.json.gz"]  # fmt: skip
    assert folder.files == dict(zip([t.data_file for t in asked], [b"one", b"two", b""]))
    assert outcome.ok and (outcome.written, outcome.size_bytes, outcome.item_bytes) == (5, 6, 50)
    assert len(outcome.data_files) == 3 and outcome.data is None  # the bytes are written, not kept


def test_a_retried_segment_first_deletes_what_its_failed_attempt_wrote(monkeypatch):
    throttled = SegmentExportFailed(2, 4, "retries exhausted", True)
    piece_jobs(monkeypatch, [piece(1, b"a", "k1"), piece(1, b"b", "k2"), SegmentFileOutcome(segment=2, error=throttled),
                             piece(1, b"a2", None)])  # fmt: skip
    folder = HadoopStandIn()
    pieces = SegmentPieces(folder)

    failed = attempt(pieces)
    assert failed.error is throttled and len(folder.files) == 2

    retried = attempt(pieces)
    assert retried.ok and folder.files == {EXPORT_DIR + "data/segment-000002.json.gz": b"a2"}
    assert EXPORT_DIR + "data/segment-000002-000001.json.gz" in folder.deleted


def test_a_file_the_driver_cannot_write_fails_the_segment_for_good(monkeypatch):
    piece_jobs(monkeypatch, [piece(1, b"a", "k1"), piece(1, b"b", None)])

    outcome = attempt(SegmentPieces(HadoopStandIn(refuse="segment-000002-000001.json.gz")))

    assert not outcome.ok and not outcome.error.retryable
    assert "writing hdfs://nn/exports/AWSDynamoDB/01714557600000-abcdef12/data/segment-000002-000001.json.gz: " \
           "org.apache.hadoop.hdfs.protocol.DSQuotaExceededException" in str(outcome.error)  # fmt: skip


def test_a_stop_ends_the_segment_before_its_next_piece(monkeypatch):
    stop = threading.Event()
    asked = piece_jobs(monkeypatch, [piece(1, b"a", "k1"), piece(1, b"b", None)])
    monkeypatch.setattr(HadoopStandIn, "write", lambda self, relative, data: stop.set())  # Ctrl+C meanwhile

    outcome = attempt(SegmentPieces(HadoopStandIn()), stop)

    assert len(asked) == 1 and not outcome.ok and "stopped" in str(outcome.error)


def test_a_hadoop_folder_names_files_under_its_uri():
    assert FOLDER.where("AWSDynamoDB/x/_started") == "hdfs://nn/exports/AWSDynamoDB/x/_started"
    assert ExportFolder(None, "hdfs:///", hadoop=True).where("AWSDynamoDB/") == "hdfs:///AWSDynamoDB/"
    assert (FOLDER.key("AWSDynamoDB/x/_started"), FOLDER.is_local, FOLDER.is_s3) == ("AWSDynamoDB/x/_started", False, False)
