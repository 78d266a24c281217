"""Steps that need a screen (dom0, cmd0): one at a time per machine, run in a host process."""
