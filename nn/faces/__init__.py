"""Framework names over nn's machinery that have no other home: PyTorch's loss modules
(``torch_losses``); Transformer Engine's face (``from nn.faces import te``: ``te``,
``te_recipe``). Keras's and PyTorch's other names live with what they name (layers,
optimizers, ``nn.precision``) and are gathered in ``nn/__init__.py``."""
