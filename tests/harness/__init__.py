"""CPU harness that compiles generated CUDA C / MSL kernels with g++ and runs them on real
threads (test tooling; not part of the installed package). See runner.py."""
