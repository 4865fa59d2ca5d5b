import sys

from benchflow.cli.report import main

sys.exit(main())
