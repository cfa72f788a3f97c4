"""The `cuda` backend: CUDA C compiled with NVRTC (through cupy.cuda.nvrtc), launched with CuPy.
"""
