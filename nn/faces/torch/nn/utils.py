"""``torch.nn.utils``: ``clip_grad_norm_`` and ``clip_grad_value_`` (nn.utils')."""

from __future__ import annotations

from nn.utils import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
