"""notebooks/migrate-on-localstack.ipynb run end to end, cell by cell, so it never rots.

The notebook runs in a Jupyter kernel of this test's Python (the venv's, which has the migrator,
ipykernel and localstack-client), against the embedded emulator it starts and stops itself
(`LOCALSTACK_ENDPOINT=embedded`), with its own Spark session: the test shares no emulator, no
session and no Jupyter settings with it, only what the notebook says it reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from testsupport.emulator import is_answering
from testsupport.ports import closed_port

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "migrate-on-localstack.ipynb"
KERNEL = "dynamodb-migrator-venv"
NOTEBOOK_SECONDS = 120  # the whole run, the kernel's start and stop included; it takes under a minute
ENDPOINT_CELL = "from testsupport.emulator import EmulatorProcess, is_answering"
SEEDED = 24  # the items the notebook seeds; its changes put one and delete one


@pytest.fixture
def own_jupyter(tmp_path, monkeypatch):
    """A kernel spec running this Python with ipykernel, and Jupyter's and IPython's folders, all under tmp_path."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile's startup files
    monkeypatch.setenv("LOCALSTACK_ENDPOINT", "embedded")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # the suite's LocalStack, when set, is not the notebook's
    return KERNEL


def run_notebook(kernel: str, notebook: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    """The notebook executed in its own folder; CellExecutionError, with the cell's traceback, when a cell fails."""
    notebook = notebook or nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(  # a cell's timeout: the test's own, above, binds first
        notebook, kernel_name=kernel, timeout=NOTEBOOK_SECONDS, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    return notebook


def run_until_the_endpoint(kernel: str) -> str:
    """The notebook's cells up to the one choosing the endpoint, run; what that cell printed."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    choosing = notebook.cells.index(cell_reading(notebook, ENDPOINT_CELL))
    notebook.cells = notebook.cells[: choosing + 1]
    return printed(run_notebook(kernel, notebook).cells[-1])


def printed(cell: nbformat.NotebookNode) -> str:
    return "".join(output.get("text", "") for output in cell.outputs if output.output_type == "stream")


def cell_reading(notebook: nbformat.NotebookNode, text: str) -> nbformat.NotebookNode:
    return next(cell for cell in notebook.cells if cell.cell_type == "code" and text in cell.source)


@pytest.mark.timeout(NOTEBOOK_SECONDS)
def test_the_notebook_migrates_replicates_and_validates(own_jupyter):
    notebook = run_notebook(own_jupyter)

    outcome_cell = next(cell for cell in notebook.cells if "outcome" in cell.metadata.get("tags", []))
    outcome = json.loads(printed(outcome_cell))
    assert outcome["endpoint"] == "the embedded emulator"
    assert (outcome["validation"], outcome["exitCode"]) == ("equal", 0)
    assert outcome["sourceItems"] == outcome["targetItems"] == SEEDED
    assert outcome["changesReplicated"] >= 3  # a put, an update, a delete, made after the copy
    assert outcome["newItem"] == {
        "pk": {"S": "new"}, "sk": {"N": "100"}, "amount": {"N": "-98765432109876543210987654321098765432"},
        "note": {"S": "written while replicating"},
    }  # fmt: skip
    assert outcome["deletedGone"] is True

    config = printed(cell_reading(notebook, "loaded.redacted_raw"))
    assert config.count("secretKey: <redacted>") == 2
    everything = "".join(printed(cell) for cell in notebook.cells if cell.cell_type == "code")
    assert "accessKey: test" not in everything and "secretKey: test" not in everything

    shown = printed(cell_reading(notebook, "copied.sort("))
    lines = {line.split()[0]: line for line in shown.splitlines() if line and not line.startswith("...")}
    assert "amount=N 12345678901234567890123456789012345678" in lines["big-number"]
    assert 'tags=SS ["blue", "green", "ü", "🚀"]' in lines["sets"]  # the update replicated
    assert 'blobs=BS ["/w==", "AAE="]' in lines["sets"]
    assert "payload=B AAEC/f7/" in lines["binary"]
    assert '"lines": {"L": [{"S": "floor 2"}, {"N": "42"}, {"M": {"deep": {"BOOL": false}}}]}' in lines["nested"]


def test_an_endpoint_that_does_not_answer_stops_the_notebook_with_the_way_out(own_jupyter, monkeypatch):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("LOCALSTACK_ENDPOINT", endpoint)
    notebook = nbformat.read(NOTEBOOK, as_version=4)

    with pytest.raises(CellExecutionError) as failed:
        run_notebook(own_jupyter, notebook)

    assert (failed.value.ename, failed.value.evalue) == (
        "RuntimeError",
        f"nothing answers at {endpoint}: start LocalStack (docker compose up localstack), "
        "or set LOCALSTACK_ENDPOINT=embedded to use the embedded emulator",
    )
    ran = [cell.source.splitlines()[0] for cell in notebook.cells if cell.cell_type == "code" and cell.outputs]
    assert ran == [ENDPOINT_CELL]  # no table, no Spark


@pytest.mark.parametrize("variable", ["LOCALSTACK_ENDPOINT", "AWS_ENDPOINT_URL"])
def test_an_endpoint_the_environment_names_is_used_as_it_is(own_jupyter, monkeypatch, endpoint_url, variable):
    monkeypatch.delenv("LOCALSTACK_ENDPOINT")
    monkeypatch.setenv(variable, endpoint_url)

    assert run_until_the_endpoint(own_jupyter) == f"AWS APIs at {endpoint_url} (the endpoint the environment names)\n"


def test_the_embedded_emulator_stops_with_the_kernel_when_no_cleanup_ran(own_jupyter):
    """As after a failed cell: the notebook's atexit hook stops it, and Jupyter's shutdown interrupts
    the kernel's process group, the emulator's too (it stops on SIGINT), before that."""
    line = run_until_the_endpoint(own_jupyter)  # the kernel is shut down when this returns

    assert line.startswith("AWS APIs at http://127.0.0.1:") and line.endswith(" (the embedded emulator)\n")
    assert not is_answering(line.split()[3])


def test_the_notebook_is_committed_without_outputs():
    """Outputs of a run hold temporary paths, random table names and timings: they would change at every run."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code if cell.outputs or cell.execution_count] == []
