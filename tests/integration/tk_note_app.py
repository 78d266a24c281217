"""A small desktop app for the cmd0 tests: a note field and two buttons, Clear and Save.

    python tk_note_app.py OUT READY

Its window sits at the screen's top left (no window manager moves it under Xvfb). Each
button press appends a line to OUT ("clear", or "save: <the note>"). READY receives the
Save button's screen box as JSON once the window is drawn.
"""

import json
import sys
import tkinter as tk
from pathlib import Path

out, ready = Path(sys.argv[1]), Path(sys.argv[2])
root = tk.Tk()
root.title("note")
root.geometry("420x160+0+0")
note = tk.Entry(root, font=("DejaVu Sans", 14))
note.place(x=20, y=20, width=280, height=30)


def log(line: str) -> None:
    with out.open("a") as fh:
        fh.write(line + "\n")


def button(text: str, colour: str, x: int, command: object) -> tk.Button:
    # The same colour under the pointer: a hovered button still matches its template.
    made = tk.Button(root, text=text, bg=colour, activebackground=colour, fg="white",
                     activeforeground="white", font=("DejaVu Sans", 14, "bold"),
                     command=command)
    made.place(x=x, y=80, width=120, height=50)
    return made


button("Clear", "#b03030", 20, lambda: log("clear"))
save = button("Save", "#2050b0", 180, lambda: log(f"save: {note.get()}"))
root.update()
box = {"left": save.winfo_rootx(), "top": save.winfo_rooty(), "width": save.winfo_width(),
       "height": save.winfo_height()}
ready.write_text(json.dumps(box))
root.mainloop()
