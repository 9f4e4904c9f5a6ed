"""The imports inside `migrator` point one way, down the layers the README's layout describes.

    cli → {run, dry_run} → {snapshot, replicate, validate} → {plan, source, stream, target, export}
        → {items, aws, wire, throttling, ratelimit, metrics, spark, ...} → {config, errors, redact, connection}

A module may import from its own layer or any layer below, never above. The pure modules
import neither pyspark nor boto3, so the driver's checks and the format code load without them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "migrator"

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer)
    for layer in (
        {"cli"},
        {"run", "dry_run"},
        {"snapshot", "replicate", "validate"},
        {"plan", "source", "stream", "target", "export"},
        {"items", "aws", "alternator_routing", "wire", "scan_page", "collector", "throttling", "ratelimit", "metrics", "spark", "stopping", "hadoop_files", "task_boundary", "driver_region", "config_text", "summary_json"},
        {"config", "errors", "redact", "connection"},
    )
)

# Summaries and progress add up outcomes; the runner runs any kind of unit: none imports a task.
EXECUTOR_TASKS = {
    "migrator.snapshot.segment_copy", "migrator.snapshot.segment_export", "migrator.snapshot.export_copy",
    "migrator.snapshot.segment_delta", "migrator.snapshot.file_delta", "migrator.snapshot.changes_delta",
}
KNOW_NO_TASK = {"migrator.snapshot.progress", "migrator.snapshot.runner", "migrator.snapshot.outcomes"}

# Imported in a fresh interpreter: none of these may load pyspark, py4j, boto3 or botocore.
PURE = [
    "migrator.config", "migrator.errors", "migrator.redact", "migrator.connection", "migrator.items", "migrator.plan", "migrator.ratelimit",
    "migrator.metrics", "migrator.export", "migrator.stream", "migrator.snapshot.outcomes", "migrator.snapshot.savepoints",
    "migrator.validate.compare", "migrator.validate.report", "migrator.validate.work_file", "migrator.collector", "migrator.scan_page",
    "migrator.target.delta_rows",
]  # fmt: skip


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every `migrator...` module the file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # `from migrator import aws`
    return {name for name in found if name.split(".")[0] == "migrator"}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # `migrator` itself: its __version__
    return next((index for index, layer in enumerate(LAYERS) if parts[1] in layer), None)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "migrator" and layer_of(m) is None] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    here = layer_of(module)
    upward = sorted(
        target for target in imported_modules(MODULES[module])
        if (there := layer_of(target)) is not None and here is not None and there < here
    )  # fmt: skip
    assert upward == [], f"{module} (layer {here}) imports from a layer above it"


@pytest.mark.parametrize("module", sorted(KNOW_NO_TASK))
def test_summaries_progress_and_the_runner_import_no_executor_task(module):
    assert imported_modules(MODULES[module]) & EXECUTOR_TASKS == set()


@pytest.mark.parametrize("package", PURE)
def test_pure_modules_import_neither_spark_nor_aws_clients(package):
    probe = (
        "import importlib, pkgutil, sys\n"
        f"root = importlib.import_module({package!r})\n"
        "for info in pkgutil.walk_packages(getattr(root, '__path__', []), root.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'pyspark', 'py4j', 'boto3', 'botocore'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"


def test_the_layering_check_sees_an_import_that_goes_up(tmp_path):
    """The check itself: a foundation module importing the entry point is caught."""
    bad = tmp_path / "items.py"
    bad.write_text("from migrator.run import migrate\nfrom migrator import cli\n")
    assert imported_modules(bad) == {"migrator.run", "migrator.run.migrate", "migrator.cli", "migrator"}
    assert layer_of("migrator.items") > layer_of("migrator.run") > layer_of("migrator.cli")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("migrator.replicate")))
def test_the_replication_imports_nothing_of_the_table_copy(module):
    """snapshot and replicate share a layer; `run` orders the two, so the replication needs
    nothing of the table copy's code (run and cli, above both, are covered by the layers)."""
    assert sorted(name for name in imported_modules(MODULES[module]) if name.startswith("migrator.snapshot")) == []


# What a snapshot's executor task loads: boto3 and the job's own code, never the driver's config
# models (pydantic, PyYAML), which scripts/package.py does not ship to executors.
EXECUTOR_COPY_PATH = [
    "migrator.snapshot.segment_copy", "migrator.snapshot.outcomes", "migrator.task_boundary", "migrator.aws",
    "migrator.wire", "migrator.source.scan", "migrator.target.writer", "migrator.target.pipeline",
]  # fmt: skip


@pytest.mark.parametrize("module", EXECUTOR_COPY_PATH)
def test_the_copys_executor_modules_need_no_driver_only_package(module):
    probe = f"import sys, {module}\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {{'pydantic', 'yaml'}}))\n"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"
