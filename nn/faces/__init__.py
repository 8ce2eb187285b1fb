"""Framework faces: a namespace per framework whose names, argument order, defaults and meaning
are that framework's, over nn's machinery.

- ``nn.faces.keras``: Keras 3 (``from nn.faces import keras``); see its docstring.
- ``nn.faces.torch``: PyTorch (``import nn.faces.torch as torch``); see its docstring.
- ``nn.faces.te``: Transformer Engine (``from nn.faces import te``; recipes in ``te_recipe``).
- ``nn.faces.torch_losses``: PyTorch's loss modules (also at ``nn.CrossEntropyLoss``).

Keras's and PyTorch's other names also live with what they name (layers, optimizers,
``nn.precision``) and are gathered in ``nn/__init__.py``."""
