"""The `cpu` backend (numba): fused passes, its column operations (sort, group_by, join, distinct),
long rows and column reductions, and the numba kernels they load.
"""
