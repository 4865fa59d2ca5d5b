import sys

from benchflow.report.cli import main

sys.exit(main())
