"""fd-flood: 500 open files, one past another."""

import os

fds = [os.open("SKILL.md", os.O_RDONLY) for _ in range(500)]
