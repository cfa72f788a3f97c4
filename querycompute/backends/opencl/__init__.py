"""The `opencl` backend: OpenCL C built and launched through PyOpenCL.
"""
