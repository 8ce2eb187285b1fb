"""``statistics_dtype``: the one rule for layers whose statistics (a norm's mean and variance,
attention's softmax) may be computed in a format of their own.

None (the default) computes them in the layer's variable format: fp32 under "float32" and every
mixed policy, fp16 under the pure "float16" policy. (Keras's normalization layers keep their
statistics in fp32 under a mixed policy; its ``MultiHeadAttention`` runs the softmax in the
compute format, fp16; PyTorch's autocast puts softmax in fp32. nn follows the fp32 rule for
both, so a model here is a little safer than the same model in Keras.) A format name (e.g.
"float16") computes only the statistics there and leaves the layer's variables in the policy's
variable format, so an experiment can change the statistics' format alone. The name is checked
when the layer is made and saved in its config only when given.
"""

from __future__ import annotations

from typing import Any

from nn.engine.formats import resolve_format


class StatisticsFormat:
    """Mixin for a Layer: ``statistics_dtype``, ``stats_format`` and its config entry."""

    statistics_dtype: str | None = None
    variable_format: Any  # (the Layer's)

    def set_statistics_dtype(self, statistics_dtype: str | None) -> None:
        """Compute the statistics in ``statistics_dtype`` (a format name; None: the variable
        format), leaving the variables' format alone; a bad name raises, naming it."""
        if statistics_dtype is not None:
            resolve_format(statistics_dtype, f"{type(self).__name__}: statistics_dtype")
        self.statistics_dtype = statistics_dtype

    @property
    def stats_format(self) -> Any:
        """Where the statistics are computed: ``statistics_dtype`` if given, else the variable
        format."""
        if self.statistics_dtype is None:
            return self.variable_format
        return resolve_format(self.statistics_dtype)

    def statistics_config(self) -> dict[str, Any]:
        """``{"statistics_dtype": ...}`` when one was given, else ``{}``."""
        return {} if self.statistics_dtype is None else {"statistics_dtype": self.statistics_dtype}
