"""Unit tests: fast, no GPU, no network. Imports this worktree's package ahead of any installed copy."""

import sys
from pathlib import Path

# Import this checkout's package, ahead of any other installed copy of kernelwright.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
