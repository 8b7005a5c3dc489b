"""kernelwright: LLM agents that write and optimize Triton kernels, and a judge that cannot be fooled."""

__version__ = "0.1.0"
