"""One printer per dialect: c_family.py holds the shared C-like printer; cuda.py, opencl.py and
metal.py hold each dialect's table of spellings and its few overrides."""
