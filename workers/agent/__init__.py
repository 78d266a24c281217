"""The agent executor: skills run by a model through Pydantic AI (docs/agent-steps.md).

Each module owns one piece: models.py which model and provider, outputs.py the typed
answer, prompt.py what the model reads, tools_spec.py the tools it is offered,
replay.py its durable turns.
"""
