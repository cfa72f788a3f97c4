"""From a graph to a plan: the lambdas' sources, fusion of map/filter runs, stages cut at pipeline
breakers (sort, distinct, group_by, join, long rows), which columns a plan reads, the fold-order rule.
The plan never imports the executor (run/), api/ or dask/.
"""
