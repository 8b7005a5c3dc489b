"""Where the judge runs: the local executor (the per-GPU workers of this host, `--gpus`) or a Ray
cluster (`--executor ray`: one actor per GPU wrapping the same worker). Outside the judge's core,
which imports nothing beyond torch, triton, numpy and the standard library: Ray is an optional
extra (`kernelwright[ray]`). docs/scaling.md."""
