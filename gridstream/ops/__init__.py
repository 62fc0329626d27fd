"""Operating a run: per-batch counts, metrics (Prometheus), flow status (JSON) and the
loopback HTTP endpoint ``gridstream run`` serves them on; ``gridstream status`` reads it.
"""
