"""The edge of an executor task: what it raises comes back as the error in its outcome."""

from __future__ import annotations

import logging
import pickle

import pytest

from migrator.errors import MigratorError, SegmentFailed, Throttled
from migrator.task_boundary import errors_returned


def segment_failed(cause: str, retryable: bool) -> SegmentFailed:
    return SegmentFailed(3, 8, cause, retryable)


def test_nothing_raised_is_no_error():
    with errors_returned("segment 3", segment_failed) as caught:
        pass
    assert caught.error is None


def test_a_migrator_error_is_named_by_the_task_and_keeps_retryable():
    with errors_returned("segment 3", segment_failed) as caught:
        raise Throttled("writing to", "target table 't'", "UnprocessedItems", 60, "target")
    assert isinstance(caught.error, SegmentFailed)
    assert str(caught.error).startswith("copying scan segment 3 of 8: writing to target table 't': throttled")
    assert caught.error.retryable is False
    retryable = MigratorError("connection reset")
    retryable.retryable = True
    with errors_returned("segment 3", segment_failed) as caught:
        raise retryable
    assert caught.error.retryable is True


def test_an_error_that_names_its_unit_is_kept_as_it_is():
    raised = MigratorError("data file d/a.json.gz: truncated")
    with errors_returned("reading d/a.json.gz", segment_failed, keep=lambda error: "d/a.json.gz" in str(error)) as caught:
        raise raised
    assert caught.error is raised


def test_a_bug_is_logged_whole_and_never_retried(caplog):
    with caplog.at_level(logging.ERROR), errors_returned("segment 3", segment_failed) as caught:
        {}["missing"]
    assert str(caught.error) == "copying scan segment 3 of 8: KeyError: 'missing'"
    assert caught.error.retryable is False
    assert "segment 3 failed unexpectedly" in caplog.text and "Traceback" in caplog.text


def test_without_a_namer_errors_pass_through_and_bugs_become_one_line():
    raised = MigratorError("rejected")
    with errors_returned("applying") as caught:
        raise raised
    assert caught.error is raised
    with errors_returned("applying") as caught:
        raise ValueError("bad")
    assert type(caught.error) is MigratorError and str(caught.error) == "ValueError: bad"
    assert str(pickle.loads(pickle.dumps(caught.error))) == "ValueError: bad"


def test_a_stop_is_not_caught():
    with pytest.raises(KeyboardInterrupt), errors_returned("segment 3", segment_failed):
        raise KeyboardInterrupt
