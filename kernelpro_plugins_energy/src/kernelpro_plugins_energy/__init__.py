"""KernelPro energy plugin: measured energy per call (NVML) as a measurement and an objective."""

__version__ = "0.1.0"
