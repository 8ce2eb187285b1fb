"""Precision: dtype policies and autocast (which format each op computes in), and loss
scaling: ``LossScaleOptimizer`` (the Keras face) and ``GradScaler`` (the PyTorch face) side by
side over one state machine (``DynamicLossScale``)."""
