"""A cmd0 desktop script (script protocol): start note_app.py on the worker's display,
type the note into its field and press Save, found on screen by its picture (save.png);
print the line the app saved as the output.

The worker hands a desktop script DISPLAY and XAUTHORITY, holds the machine's cmd0 lock
while it runs, and kills it (and the app) past run.timeout.
"""

import json
import os
import subprocess
import sys
import time

import pyautogui
import pyscreeze
from PIL import Image, ImageGrab

WINDOW_S = 15  # how long the app may take to show its window
FIELD_FROM_SAVE = (-80, -70)  # the note field's centre, from the Save button's


def find(template, timeout_s):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            box = pyscreeze.locate(template, ImageGrab.grab(), confidence=0.9)
        except pyscreeze.ImageNotFoundException:
            box = None
        if box is not None:
            return int(box.left + box.width // 2), int(box.top + box.height // 2)
        if time.monotonic() > deadline:
            sys.exit(f"the Save button (save.png) did not show within {timeout_s} s")
        time.sleep(0.1)


def main():
    with open(os.environ["SKILL_INPUTS"], encoding="utf-8") as fh:
        note = json.load(fh)["note"]
    saved = os.path.abspath("saved-notes.txt")
    app = subprocess.Popen([sys.executable, "note_app.py", saved])
    try:
        save_x, save_y = find(Image.open("save.png").convert("RGB"), WINDOW_S)
        pyautogui.FAILSAFE = False
        pyautogui.click(save_x + FIELD_FROM_SAVE[0], save_y + FIELD_FROM_SAVE[1])
        pyautogui.write(note, interval=0.01)
        pyautogui.click(save_x, save_y)
        deadline = time.monotonic() + 5
        while not (os.path.exists(saved) and os.path.getsize(saved) > 0):
            if time.monotonic() > deadline:
                sys.exit("the app saved nothing after Save was clicked")
            time.sleep(0.05)
        with open(saved, encoding="utf-8") as fh:
            line = fh.read().splitlines()[-1]
    finally:
        app.terminate()
        app.wait(timeout=5)
    with open(os.environ["SKILL_OUTPUT"], "w", encoding="utf-8") as fh:
        json.dump({"saved": line, "matches": line == note}, fh)


if __name__ == "__main__":
    main()
