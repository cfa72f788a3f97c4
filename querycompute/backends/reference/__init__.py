"""The `numpy` backend: the reference interpreter every other backend is tested against.
"""
