"""What greet-lib says: imported, so Python would look for its bytecode."""

WORD = "hello"
