"""Saving: ``model.save(path)`` and ``nn.load_model(path)``, one .npz checkpoint."""
