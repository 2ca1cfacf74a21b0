"""Training our own masked-diffusion denoiser from Python source.

The shipped model has to be trainable by anyone from files already on their
machine (the standard library), in minutes on a CPU and unchanged on a GPU with a
bigger time budget.  `data` turns source files into a corpus (dropping copies of
the benchmark, see `contamination`, and code under licences we may not train on,
see `licences`) and a tokenizer; `rows` cuts training rows from the token
stream; `objective` scores the model on them; `train` runs the loop and writes a
directory that `dlm_lsp.models.tiny.TinyModel.load` reads; `gpu_run` is the one
command for a GPU lent for a few minutes.  Nothing here imports the server's
dependencies (pygls, lsprotocol, tree-sitter).
"""
