"""KernelPro system-level profiling: what happens between and around kernels.

A timeline of one forward call (Nsight Systems where it can make a report, otherwise the
PyTorch profiler's Kineto trace), its per-call statistics, and micro-profilers that turn
them into findings: launch-bound calls, host-device synchronisations and copies, allocator
churn, CPU-side overhead, idle gaps and the kernel time share.
"""

__version__ = "0.1.0"
