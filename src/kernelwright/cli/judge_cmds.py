"""`kernelwright tasks` and `kernelwright eval` (placeholder until the judge lands)."""
from . import app  # noqa: F401
