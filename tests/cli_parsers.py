"""Every argument parser of the `dlm-lsp` command line, by the command a user types."""

from __future__ import annotations

import argparse


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser a user reaches: `dlm-lsp` and its commands, the commands that parse
    their own options, and the GPU run the README has a user start as a module."""
    from dlm_lsp.cli import build_parser
    from dlm_lsp.models.command import parser as models_parser
    from dlm_lsp.remote.command import parser as remote_parser
    from dlm_lsp.training.gpu_run import build_parser as gpu_run_parser
    from dlm_lsp.training.train import build_parser as train_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prog: str, parser: argparse.ArgumentParser) -> None:
        found[prog] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{prog} {name}", sub)

    walk("dlm-lsp", build_parser())
    walk("dlm-lsp models", models_parser())
    walk("dlm-lsp train", train_parser())
    walk("dlm-lsp serve-remote", remote_parser())
    walk("python3 -m dlm_lsp.training.gpu_run", gpu_run_parser())
    return found
