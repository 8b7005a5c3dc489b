"""Benchmark suites: the built-in task files, and adapters that read other benchmarks from a
user's own checkout (never vendored here)."""


def register_adapters(table: dict) -> None:
    """Fill `table` with {ref prefix: loader(rest of ref) -> Task} for every adapter."""
    from . import geak, kernelbench, tritonbench_t

    table.update(geak.ADAPTER_LOADERS)
    table.update(kernelbench.ADAPTER_LOADERS)
    table.update(tritonbench_t.ADAPTER_LOADERS)
