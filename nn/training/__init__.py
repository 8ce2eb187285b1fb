"""Training: the fit loop and its data handling (``loop``), ``History``, the progress bar
(``progress``) and ``GradientTape``."""
