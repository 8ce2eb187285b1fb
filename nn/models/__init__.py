"""Models: ``Model`` (a Layer with compile, fit, evaluate, predict, save) and its summary table.
``Sequential`` and the functional model live beside the layers they chain (``nn.layers``)."""
