"""``MultiHeadAttention(num_heads, key_dim)`` (Keras face and weight layout).

Called as ``mha(query, value, key=None, use_causal_mask=False, attention_mask=None,
return_attention_scores=False, training=False)``; inputs ``(batch, T, d)`` and ``(batch, S,
d_v)``; the output has the query's last dimension. Weights, in ``get_weights()`` order (Keras's
EinsumDense layout): query, key and value kernels ``(d_in, heads, key_dim)`` each followed by
its bias ``(heads, key_dim)``, then the output kernel ``(heads, key_dim, d)`` and bias ``(d,)``.

Precision: the four projections and the two attention products take compute-format inputs,
accumulate in fp32 (or ``accumulator=``, e.g. "float16") and round once; the query is scaled
by 1/sqrt(key_dim) in the compute format (as Keras); the softmax runs in the layer's variable
format -- fp32 under mixed policies, fp16 under "float16" (nn.functions.attention) -- or in
``statistics_dtype`` when given (e.g. "float16" with fp32 variables: only the softmax's format
changes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import checks, sites
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor, Variable
from nn.fp8.scope import layer_scope as fp8_layer_scope
from nn.functions.accumulate import accumulated_linear, accumulator_format, accumulator_name
from nn.functions.attention import attention, causal_mask
from nn.layers.base import Layer, register
from nn.layers.initializers import get_initializer
from nn.layers.statistics import StatisticsFormat
from nn.precision.policy import Policy

Shape = tuple[int | None, ...]


def _reshaped(weight: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A weight read reshaped, its gradient still rounded (and counted) at the weight's site."""
    out = F.reshape(weight, shape)
    if out is not weight:
        out.grad_site = weight.grad_site
    return out


@register
class MultiHeadAttention(StatisticsFormat, Layer):
    """Multi-head scaled dot-product attention (see the module docstring)."""

    def __init__(self, num_heads: int, key_dim: int, value_dim: int | None = None,
                 dropout: float = 0.0, use_bias: bool = True, output_shape: Any = None,
                 kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", accumulator: str | None = None,
                 dtype: Policy | str | None = None, name: str | None = None,
                 seed: int | None = None, statistics_dtype: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        cls = "MultiHeadAttention"
        self.set_statistics_dtype(statistics_dtype)
        self.num_heads = checks.count(f"{cls}: num_heads", num_heads, minimum=1)
        self.key_dim = checks.count(f"{cls}: key_dim", key_dim, minimum=1)
        self.value_dim = (self.key_dim if value_dim is None
                          else checks.count(f"{cls}: value_dim", value_dim, minimum=1))
        if dropout != 0:
            raise ValueError(f"{cls}: dropout={dropout!r} is not supported; put an "
                             "nn.layers.Dropout after the layer")
        if output_shape is not None:
            raise ValueError(f"{cls}: output_shape={output_shape!r} is not supported; the output "
                             "has the query's last dimension (add a Dense to change it)")
        if not isinstance(use_bias, (bool, np.bool_)):
            raise TypeError(f"{cls}: use_bias must be True or False, got {use_bias!r}")
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.accumulator = accumulator_format(accumulator, f"{cls}: accumulator")
        self.seed = checks.seed(f"{cls}: seed", seed)
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self._shapes: dict[str, Shape] = {}
        self.proj: dict[str, tuple[Variable, Variable | None]] = {}

    # --- weights ------------------------------------------------------------------------------
    def build_shapes(self, query_shape: Shape, value_shape: Shape, key_shape: Shape) -> None:
        """Create the weights for inputs of these shapes (Keras's ``build``)."""
        for what, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(f"layer '{self.name}': {what} must have shape (batch, length, "
                                 f"features), got shape {shape}")
        d = int(query_shape[-1])  # type: ignore[arg-type]
        h = self.num_heads
        for what, d_in, width in (("query", query_shape[-1], self.key_dim),
                                  ("key", key_shape[-1], self.key_dim),
                                  ("value", value_shape[-1], self.value_dim)):
            kernel = self.add_weight(f"{what}_kernel", (int(d_in), h, width),  # type: ignore
                                     self.kernel_initializer, rng=self._rng)
            bias = (self.add_weight(f"{what}_bias", (h, width), self.bias_initializer,
                                    rng=self._rng) if self.use_bias else None)
            self.proj[what] = (kernel, bias)
        kernel = self.add_weight("attention_output_kernel", (h, self.value_dim, d),
                                 self.kernel_initializer, rng=self._rng)
        bias = (self.add_weight("attention_output_bias", (d,), self.bias_initializer,
                                rng=self._rng) if self.use_bias else None)
        self.proj["output"] = (kernel, bias)
        self._shapes = {"query_shape": (None, *query_shape[1:]),
                        "value_shape": (None, *value_shape[1:]),
                        "key_shape": (None, *key_shape[1:])}
        self.built = True

    def get_build_config(self) -> dict[str, Any] | None:
        return {k: list(v) for k, v in self._shapes.items()} if self.built else None

    def build_from_config(self, config: dict[str, Any]) -> None:
        try:
            shapes = [tuple(config[k]) for k in ("query_shape", "value_shape", "key_shape")]
        except (KeyError, TypeError):
            raise ValueError(f"layer '{self.name}': build config must hold query_shape, "
                             f"value_shape and key_shape lists, got {config!r}") from None
        if not self.built:
            self.build_shapes(*shapes)

    # --- calling ------------------------------------------------------------------------------
    def _dense(self, x: Tensor, what: str, out_shape: tuple[int, ...]) -> Tensor:
        """x (..., d_in) times a kernel (d_in, *out_shape) plus bias, in one rounding."""
        kernel, bias = self.proj[what]
        width = int(np.prod(out_shape))
        d_in = kernel.size // width
        k = _reshaped(self.read(kernel), (d_in, width))
        b = _reshaped(self.read(bias), (width,)) if bias is not None else None
        rows = F.reshape(x, (-1, d_in))
        y = (F.linear(rows, k, b) if self.accumulator is None
             else accumulated_linear(rows, k, b, self.accumulator))
        return F.reshape(y, (*x.shape[:-1], *out_shape))

    def _heads(self, x: Tensor, what: str, width: int) -> Tensor:
        """(N, L, d_in) -> (N, heads, L, width)."""
        return F.transpose(self._dense(x, what, (self.num_heads, width)), (0, 2, 1, 3))

    def _mask(self, t: int, s: int, causal: bool, attention_mask: Any) -> np.ndarray | None:
        mask = causal_mask(t, s) if causal else None
        if attention_mask is not None:
            m = np.asarray(attention_mask.data if isinstance(attention_mask, Tensor)
                           else attention_mask).astype(bool)
            if m.ndim != 3 or m.shape[1:] != (t, s):
                raise ValueError(f"layer '{self.name}': attention_mask must have shape (batch, "
                                 f"{t}, {s}), got shape {m.shape}")
            m = m[:, None]  # broadcast over the heads
            mask = m if mask is None else m & mask
        return mask

    def __call__(self, query: Any, value: Any, key: Any = None,  # type: ignore[override]
                 *, use_causal_mask: bool = False, attention_mask: Any = None,
                 return_attention_scores: bool = False, training: bool | None = None) -> Any:
        """Attend from ``query`` to ``value`` (``key`` defaults to ``value``); the options are
        keyword-only (Keras's fourth positional argument is a mask nn does not take)."""
        training = self.resolve_training(training)
        q_in, v_in = self._as_input(query), self._as_input(value)
        k_in = v_in if key is None else self._as_input(key)
        if not self.built:
            self.build_shapes(q_in.shape, v_in.shape, k_in.shape)
        for what, t in (("query", q_in), ("value", v_in), ("key", k_in)):
            want = self._shapes[f"{what}_shape"]
            if t.ndim != 3 or t.shape[-1] != want[-1]:
                raise ValueError(f"layer '{self.name}' expects {what} of shape (batch, length, "
                                 f"{want[-1]}), got shape {t.shape}")
        if k_in.shape[1] != v_in.shape[1] or len({q_in.shape[0], v_in.shape[0], k_in.shape[0]}) > 1:
            raise ValueError(f"layer '{self.name}': query {q_in.shape}, key {k_in.shape} and "
                             f"value {v_in.shape} must share the batch, key and value the length")
        with name_scope(self.name), fp8_layer_scope(self.policy, self):  # a recipe policy's matmuls
            q = self._heads(q_in, "query", self.key_dim) * (1.0 / math.sqrt(self.key_dim))
            k = self._heads(k_in, "key", self.key_dim)
            v = self._heads(v_in, "value", self.value_dim)
            mask = self._mask(q_in.shape[1], k_in.shape[1], bool(use_causal_mask),
                              attention_mask)
            ctx, probs = attention(q, k, v, mask, self.stats_format, self.accumulator)
            merged = F.transpose(ctx, (0, 2, 1, 3))  # (N, T, heads, value_dim)
            y = self._dense_out(merged)
        y.grad_site = sites.activation_grad(self.name)
        return (y, probs) if return_attention_scores else y

    def _dense_out(self, merged: Tensor) -> Tensor:
        """(N, T, heads, value_dim) -> (N, T, d) through the output kernel (heads, value_dim, d)."""
        n, t = merged.shape[:2]
        flat = F.reshape(merged, (n, t, self.num_heads * self.value_dim))
        return self._dense(flat, "output", (self.proj["output"][0].shape[-1],))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "use_bias": self.use_bias,
                "accumulator": accumulator_name(self.accumulator), "seed": self.seed,
                **self.statistics_config()}
