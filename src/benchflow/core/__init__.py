"""The records every stage shares: a job's status, the job, and its result row."""
