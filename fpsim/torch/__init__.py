"""fpsim's formats, rounding modes, block formats and telemetry on torch tensors.

``import fpsim`` never imports torch; this package is imported explicitly
(``import fpsim.torch``) and needs PyTorch (``pip install "fpsim[torch]"``).

- ``round(t, fmt, mode)``: exactly ``fpsim.round``'s values, in t's dtype and on t's device;
- ``mx.quantize / encode / decode``: ``fpsim.mx``'s block formats (MX, NVFP4);
- ``quantize(t, fmt)``: rounding as an autograd function (straight-through gradient);
- ``emulate(module, policy)``: a torch module's Linear, Conv, matmul and attention products
  (nn.MultiheadAttention's included) in a policy's formats, with fp32 accumulation and
  gradients rounded to each tensor's format; nn's policy names, block recipes and per-tensor
  fp8 recipes (``fpsim.torch.fp8``).
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401  (the import check; submodules import torch themselves)
except ImportError as error:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "fpsim.torch needs PyTorch, which is not installed. Install it with "
        "`pip install \"fpsim[torch]\"` (or `pip install torch`; see https://pytorch.org for "
        "the build that fits your machine)."
    ) from error

from fpsim.torch import mx
from fpsim.torch.autograd import quantize
from fpsim.torch.emulate import emulate
from fpsim.torch.policy import TorchPolicy, get_policy
from fpsim.torch.rounding import round  # noqa: A004  (fpsim.round's name)

__all__ = ["TorchPolicy", "emulate", "get_policy", "mx", "quantize", "round"]
