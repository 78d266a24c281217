"""`skillq dashboard`: skills, pipeline runs, trends, daemons, schedules and notes in the
browser. Server-rendered pages (Starlette + Jinja2, SVG drawn here), reading the same
records and calling the same repository functions as the CLI."""
