"""spark-submit entry point: `spark-submit jobs/migrate.py --config conf/X.yaml`."""

import sys

from migrator.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
