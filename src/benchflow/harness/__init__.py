"""The isolated child: one job, one fresh process (`python -m benchflow.harness JOB.json`)."""
