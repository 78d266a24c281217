"""Desktop steps: pyautogui on the worker's X display (see docs/screen-skills.md)."""
