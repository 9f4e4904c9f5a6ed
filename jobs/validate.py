"""spark-submit entry point: `spark-submit jobs/validate.py --config conf/X.yaml [--report report.json]`."""

import sys

from migrator.cli import validate_main

if __name__ == "__main__":
    sys.exit(validate_main(sys.argv[1:]))
