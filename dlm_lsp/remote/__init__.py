"""Fills on another machine: the language server as a thin client of a shared engine.

`wire` is the protocol, `http` the connection plumbing, `retry` what both backends on a
server share (retries, the local fallback, their requests), `client` the backend the
language server uses (`backend: remote`), `service` the engine deployed with Ray Serve
(`dlm-lsp serve-remote`, whose options `command` reads), `metrics` the replicas'
counters gathered for `/v1/metrics`, `launch` a local service process for benchmarks
and tests, `sglang` the backend for models that SGLang serves and `sglang_prompt` how
an infill is asked of them.
"""
