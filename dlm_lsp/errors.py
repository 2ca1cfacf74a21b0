"""The implementation-defined JSON-RPC error codes dlm-lsp answers with (-32099..-32000).

One list, so the language server's handlers and the TCP admission step (which
answers before any handler runs) cannot give one code two meanings.  The README
("What the server speaks") says what each means to an editor.  -32001 and -32002 predate the
admission step and sit on codes LSP also names (UnknownErrorCode,
ServerNotInitialized); clients already key on them, so they stay.
"""

MODEL_UNAVAILABLE = -32001
OUT_OF_MEMORY = -32002
TIMEOUT = -32003
SERVER_BUSY = -32004  # also a TCP server at its --max-clients: try again later
BACKEND_FAILED = -32005
UNAUTHORIZED = -32006  # a TCP client without the server's token
