"""A small desktop app the digest-note skill drives: a note field and two buttons.

    python3 note_app.py OUT

Clear empties the field; Save appends the note to OUT as one line. A stand-in for the
desktop program a team would really file its notes in.
"""

import sys
import tkinter as tk

out = sys.argv[1]
root = tk.Tk()
root.title("Team notes")
root.geometry("420x160+0+0")
note = tk.Entry(root, font=("DejaVu Sans", 14))
note.place(x=20, y=20, width=280, height=30)


def save():
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(note.get() + "\n")


def button(text, colour, x, command):
    # The same colour under the pointer, so a hovered button still matches save.png.
    tk.Button(root, text=text, bg=colour, activebackground=colour, fg="white",
              activeforeground="white", font=("DejaVu Sans", 14, "bold"),
              command=command).place(x=x, y=80, width=120, height=50)


button("Clear", "#b03030", 20, lambda: note.delete(0, tk.END))
button("Save", "#2050b0", 180, save)
root.mainloop()
