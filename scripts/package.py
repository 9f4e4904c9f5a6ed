"""Build dist/dynamodb-migrator.zip for `spark-submit --py-files` on a cluster.

The zip holds the `migrator` package, tenacity (pure Python, which the executors' batch
writer uses) and alternator-client (pure Python: Alternator's node discovery and request routing,
which every executor's clients of an Alternator side use). Executors also need boto3 on every node (an EMR bootstrap action installs
it); pydantic and PyYAML are needed only by the driver. For clusters without boto3, ship a packed virtualenv instead
(see docs/cluster.md, "Running on a cluster").
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import alternator
import tenacity

REPO = Path(__file__).resolve().parent.parent
PACKAGES = [REPO / "migrator", Path(tenacity.__file__).parent, Path(alternator.__file__).parent]


def build(output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for path in sorted(package.rglob("*.py")):
                archive.write(path, path.relative_to(package.parent))
    return output


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "dist" / "dynamodb-migrator.zip"
    print(build(target))
