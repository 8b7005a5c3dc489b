"""A worker process, one per GPU (a few on CPU): trusted, never imports candidate code. Forks the
reference and candidate children, and decides the verdict: the cascade of stages, every
comparison, the timing decisions and statistics, the time limits."""
