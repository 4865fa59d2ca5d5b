"""Real services for tests and for trying benchflow's cluster paths on one host: a
SLURM cluster (slurm.py), PostgreSQL with an MLflow server on it (postgres.py) and a
Ray cluster of two nodes (ray_cluster.py). Each is a script with `up` and `down`
(`make slurm-up`, ...), keeps its state and PID files under one folder
($BENCHFLOW_SERVICES_DIR, default /tmp/benchflow-services), and stops its daemons by
the PIDs it recorded, never by name. There is no init system here: nothing is left to
systemd."""
