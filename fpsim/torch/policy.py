"""Policies for ``fpsim.torch.emulate``, by nn's names (Keras's policy names and nn's recipe
names), parsed here from fpsim's formats (fpsim never imports nn).

========================  ===========  ========  ==================  ========================
policy name               compute      variable  product inputs      output gradient
========================  ===========  ========  ==================  ========================
``"float32"``             float32      float32   (not rounded)       (not rounded)
``"mixed_float16"``       float16      float32   float16             float16
``"mixed_bfloat16"``      bfloat16     float32   bfloat16            bfloat16
``"float16"``             float16      float16   float16             float16
``"bfloat16"``            bfloat16     bfloat16  bfloat16            bfloat16
``"mixed_<fmt>"``         fmt          float32   fmt                 fmt
``"<fmt>"``               fmt          fmt       fmt                 fmt
``"mixed_tf32"``          float32      float32   tf32                tf32
``"mxfp8"``               bfloat16     float32   mxfp8_e4m3 blocks   mxfp8_e4m3 blocks
``"mxfp8_hybrid"``        bfloat16     float32   mxfp8_e4m3 blocks   mxfp8_e5m2 blocks
``"mxfp6_e3m2"`` ...      bfloat16     float32   that block format   that block format
``"fp8_hybrid_delayed"``  bfloat16     float32   e4m3fn, scaled      e5m2, scaled
``"fp8_e4m3_delayed"``    bfloat16     float32   e4m3fn, scaled      e4m3fn, scaled
``"fp8_hybrid_current"``  bfloat16     float32   e4m3fn, scaled      e5m2, scaled
``"fp8_e4m3_current"``    bfloat16     float32   e4m3fn, scaled      e4m3fn, scaled
========================  ===========  ========  ==================  ========================

(the block recipes: ``BLOCK_RECIPES``, nn's names for fpsim.mx's formats). ``<fmt>`` is any
fpsim format name or alias (``"mixed_e4m3fn"``). ``emulate`` keeps the module's parameters as
they are (fp32 masters, updated by the torch optimizer) under every policy; the variable format
is reported, not applied. nn's per-tensor fp8 recipes (``PER_TENSOR_RECIPES``: delayed and
current scaling) scale each tensor of ``linear`` and ``matmul`` products to fp8 with its own
state (``fpsim.torch.fp8``); their other products run in the compute format.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fpsim.catalog import BF16, FP32, TF32, get_format
from fpsim.formats import Format
from fpsim.mx import BlockFormat, get_block_format
from fpsim.torch.fp8 import PER_TENSOR_RECIPES, PerTensorScaling

# nn's block-scaling recipe names: (forward block format, backward block format)
BLOCK_RECIPES: dict[str, tuple[str, str]] = {
    "mxfp8": ("mxfp8_e4m3", "mxfp8_e4m3"),
    "mxfp8_hybrid": ("mxfp8_e4m3", "mxfp8_e5m2"),
    "mxfp6_e3m2": ("mxfp6_e3m2", "mxfp6_e3m2"),
    "mxfp6_e2m3": ("mxfp6_e2m3", "mxfp6_e2m3"),
    "mxfp4": ("mxfp4_e2m1", "mxfp4_e2m1"),
    "mxint8": ("mxint8", "mxint8"),
    "nvfp4": ("nvfp4", "nvfp4"),
}


@dataclass(frozen=True)
class TorchPolicy:
    """What ``emulate`` rounds, and to which format.

    ``inputs``: the format (or block format) a product's operands are rounded to;
    ``compute_format``: the format its output is rounded to, once, after fp32 accumulation,
    and the format of every gradient that leaves a product; ``grads``: the format (or block
    format) the output gradient is rounded to before the backward products.
    ``rounds`` is False for "float32" (nothing to emulate). ``scaling``: a per-tensor fp8
    recipe for linear and matmul products (then ``inputs`` and ``grads`` are the compute
    format, for the other products), or None.
    """

    name: str
    compute_format: Format
    variable_format: Format
    inputs: Format | BlockFormat
    grads: Format | BlockFormat
    scaling: PerTensorScaling | None = None

    @property
    def rounds(self) -> bool:
        return not (self.compute_format == FP32 and self.inputs == FP32 and self.grads == FP32)


def get_policy(policy: TorchPolicy | str, *, reduce_amax: bool | None = None) -> TorchPolicy:
    """A TorchPolicy from its name (see the module's table), or the policy itself.

    ``reduce_amax`` (per-tensor fp8 recipes only): False keeps each rank's amaxes and scales
    its own under torch.distributed; None or True all-reduces them (MAX), TE's default.

    >>> p = get_policy("mixed_float16")
    >>> p.compute_format.name, p.variable_format.name
    ('float16', 'float32')
    """
    if reduce_amax is not None:
        name = policy.name if isinstance(policy, TorchPolicy) else policy
        if not (isinstance(name, str) and name.strip().lower() in PER_TENSOR_RECIPES):
            raise ValueError(f"reduce_amax applies to the per-tensor fp8 recipes "
                             f"({', '.join(PER_TENSOR_RECIPES)}), got policy {name!r}")
        base = get_policy(name)
        assert base.scaling is not None
        return replace(base, scaling=replace(base.scaling, reduce_amax=reduce_amax))
    if isinstance(policy, TorchPolicy):
        return policy
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a policy name or a TorchPolicy, got "
                        f"{type(policy).__name__}")
    key = policy.strip().lower()
    if key in BLOCK_RECIPES:
        forward, backward = BLOCK_RECIPES[key]
        return TorchPolicy(key, BF16, FP32, get_block_format(forward),
                           get_block_format(backward))
    if key == "mixed_tf32":
        return TorchPolicy(key, FP32, FP32, TF32, TF32)
    if key in PER_TENSOR_RECIPES:
        return TorchPolicy(key, BF16, FP32, BF16, BF16, PER_TENSOR_RECIPES[key])
    mixed = key.startswith("mixed_")
    try:
        fmt = get_format(key[len("mixed_"):] if mixed else key)
    except ValueError:
        raise ValueError(
            f"unknown policy {policy!r}; policies are 'float32', 'mixed_float16', "
            "'mixed_bfloat16', 'float16', 'bfloat16', 'mixed_<format>', '<format>' (any fpsim "
            f"format name), 'mixed_tf32', a block recipe ({', '.join(BLOCK_RECIPES)}) or a "
            f"per-tensor fp8 recipe ({', '.join(PER_TENSOR_RECIPES)})"
        ) from None
    return TorchPolicy(key, fmt, FP32 if mixed else fmt, fmt, fmt)
