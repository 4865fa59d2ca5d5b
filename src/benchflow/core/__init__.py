"""The records every stage shares: a job's status, the job (planned, and as its child
is told it), and where a sweep's files live. Result rows are results/'s."""
