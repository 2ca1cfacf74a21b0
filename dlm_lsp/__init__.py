"""dlm-lsp: a language server that fills code with masked-diffusion language models."""

__version__ = "0.1.0"
