"""Dask inputs: a source kind (dask arrays / dataframes) and its runner (one fused pass per chunk,
partials combined by Dask).
"""
