"""How each kind of step runs, one executor a kind behind one interface (base.py), chosen
by the registry (registry.py) for the run path and the cache path alike.

    kind          executor                  runs
    nested run    nested.NestedRunExecutor  an orchestrator's steps, as a run of its own
    agent         agent.AgentExecutor       a model, with the seed's tools
    screen        screen.ScreenExecutor     dom0/cmd0 actions or scripts, one at a time
    script        script.ScriptExecutor     a ``run:`` command, sandboxed

A new kind is a module with a StepExecutor and a line in registry.EXECUTORS.
"""
