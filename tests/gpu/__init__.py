"""GPU-only tests (CUDA via pycuda, OpenCL on a GPU platform); skipped without a GPU."""
