"""``torch.save`` / ``torch.load`` of state dicts: ``nn.saving.state_file``'s."""

from __future__ import annotations

from nn.saving.state_file import load, save

__all__ = ["load", "save"]
