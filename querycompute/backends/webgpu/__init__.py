"""The `webgpu` backend: WGSL run through wgpu-py (its device, timing, windows and column operations).
"""
