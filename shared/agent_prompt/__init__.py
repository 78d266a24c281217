"""What a model is told: an agent step's prompt, its skill's files, the tools' names and
schemas, and `skillq ask`'s prompt. Shared, so a client can show (`--dry-run`) exactly
what a worker will send."""
