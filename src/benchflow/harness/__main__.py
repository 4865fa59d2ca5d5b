import os
import sys

from benchflow.harness.child import main

code = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)  # its result is written: no interpreter teardown (torch's took about 1 s)
