"""The `metal` backend: Metal Shading Language source generation only.
"""
