import sys

from benchflow.harness.child import main

sys.exit(main(sys.argv[1:]))
