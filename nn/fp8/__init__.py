"""fp8 and block-scaled training: recipes, where they apply, and what they clip.

>>> import nn
>>> recipe = nn.fp8.DelayedScaling(fp8_format="hybrid", amax_history_len=16)
>>> with nn.fp8_autocast(recipe):                                        # doctest: +SKIP
...     loss = model.loss(y, model(x)); loss.backward()
>>> print(recipe.log.table())                                            # doctest: +SKIP

- recipes (``nn.fp8.recipes``): ``DelayedScaling``, ``CurrentScaling``, ``BlockScaling``
  (MX formats, NVFP4), ``TF32Inputs``; ``Float8BlockScaling`` (``nn.fp8.blockwise``:
  1x128 and 128x128 fp8 tiles with float32 scales); ``NVFP4BlockScaling`` (``nn.fp8.nvfp4``:
  TE's NVFP4 training recipe, policy "nvfp4_te"); per-tensor state ``nn.fp8.state.ScalingState``;
- where they apply (``nn.fp8.scope``): ``fp8_autocast(recipe)`` or a recipe policy
  (``nn.Policy("fp8_hybrid_delayed")``, "mxfp8", "nvfp4", "mixed_tf32", ...: ``POLICY_RECIPES``);
- the quantized matmul (``nn.fp8.ops``) and its straight-through backward;
- telemetry: ``recipe.log`` (``TelemetryLog``: per tensor and step amax, scale, shares
  saturated and flushed to zero) and ``recipe.states[name].amax_history``; ``fit`` summarises
  it per epoch in ``History.fp8``;
- checkpoints (``nn.fp8.persist``): ``model.save`` carries the recipes of the layers'
  policies; ``recipe.state_dict()`` / ``load_state_dict`` for a recipe of ``fp8_autocast``.

This package imports nothing of nn's ops at import time (nn.policy reads its table of names);
``nn.fp8.ops`` is loaded by the matmul that needs it.
"""

from nn.fp8.blockwise import Float8BlockScaling
from nn.fp8.nvfp4 import NVFP4BlockScaling
from nn.fp8.recipes import (
    POLICY_RECIPES,
    BlockScaling,
    CurrentScaling,
    DelayedScaling,
    Recipe,
    TF32Inputs,
    get_recipe,
)
from nn.fp8.scope import active_recipe, fp8_autocast, recipes_of
from nn.fp8.state import ScalingState, TelemetryLog, TensorRecord

autocast = fp8_autocast  # ``nn.fp8.autocast(recipe)``, the short spelling

__all__ = [
    "POLICY_RECIPES", "BlockScaling", "CurrentScaling", "DelayedScaling", "Float8BlockScaling",
    "NVFP4BlockScaling",
    "Recipe",
    "ScalingState", "TF32Inputs", "TelemetryLog", "TensorRecord", "active_recipe", "autocast",
    "fp8_autocast", "get_recipe", "recipes_of",
]
