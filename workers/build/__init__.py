"""A skill build run by skillq itself (`skillq build`): its step (controller.py), the
drafts' folders on the machine building them (drafts.py)."""
