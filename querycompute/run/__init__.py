"""Running plans: the engine (signature -> compiled entry -> results), the in-memory memo and compile
locks, tiers, the warm path, the staged-plan executor, streaming and early-exit windows.
"""
