"""The home of the joins: join / left_join (pairs of row indexes in LINQ's order) and the
semi-join of intersect_by / except_by (a flag per row) (DESIGN.md section 2, "one home per
algorithm"). Key equality is the order bits' (_codegen/order_keys.py) of both sides' keys in
their common type: all NaNs one value, -0.0 == 0.0.

    part        file              what it holds
    GPU         gpu.py            a hash join from the radix sort: the build side's hashes
                                  sorted into a CSR table, probe counts, a scan, one thread
                                  per output pair
    CPU         cpu_kernels.py    numba text: an open-addressing table with a bloom filter,
                                  chunked two-pass probes (count, scan, write), the counting
                                  scatter that restores the left side's order, membership flags
    reference   reference.py      key ids, join_reference (a stable sort of the right ids, two
                                  binary searches per left row), semi_reference, fill values

Pairs come in LINQ's order (left rows in order, a left row's matches in right order; a left
join's unmatched row once with right index -1) on every runtime: exact integer work.
"""
