"""The engine: tensors, autograd, rounding, the format algebra, telemetry sites and the name
scope, dtypes, the class registry, argument checks and the numba kernels.

It imports no layer, model, training, saving or face module: everything else in nn builds on
it. (tests/nn/test_layout.py checks that from the import graph.)
"""
