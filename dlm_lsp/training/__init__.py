"""Training our own tiny masked-diffusion denoiser from Python source.

The shipped model has to be trainable by anyone from files already on their
machine (the standard library), in minutes on a CPU and unchanged on a GPU with a
bigger time budget.  `data` turns source files into a tokenizer and training
rows, `objective` scores the model on those rows, and `train` runs the loop and
writes a directory that `dlm_lsp.models.tiny.TinyModel.load` reads.
"""
