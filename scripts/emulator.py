"""Run the project's emulator (moto over HTTP, with its extensions) in the foreground:

    python scripts/emulator.py --port 4566 [--host 127.0.0.1] [--auth]

The emulator itself is testsupport/emulator.py; this keeps the documented command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testsupport.emulator import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
