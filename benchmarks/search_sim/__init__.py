"""A simulated kernel-optimization environment for comparing search policies without a GPU."""
