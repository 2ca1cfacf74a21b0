"""Allow ``python -m dlm_lsp``: the same entry point as the ``dlm-lsp`` script."""

from dlm_lsp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
