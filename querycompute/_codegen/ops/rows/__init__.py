"""The home of long rows (DESIGN.md section 4b): reductions along the rows of a 2-D input
X of shape (m, k), bound as its flat C-ordered buffer.

    part        file              what it holds
    GPU         gpu.py            one work-group per row (row steps), or column tiles
    CPU         cpu.py            a row plan printed as numba source (row per iteration: the
                                  steps' loops over the row; one nogil entry point over a
                                  range of rows, run by morsels: backends/cpu/rows_numba.py)
                cpu_kernels.py    numba text of the column-tiled reduction (one nogil entry
                                  point over a range of tiles, then a combine in chunk order;
                                  run by morsels: backends/cpu/rows_columns.py)
    reference   backends/reference/rows.py (whole-array NumPy reductions per row)
"""
