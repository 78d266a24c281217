"""A dom0 browser script: run(page, inputs) gets a ready Playwright page (a fresh
context in Chromium) and returns the outputs; bytes become artifacts in the store.

The digest's Markdown is rendered to HTML by the small converter below and served on
127.0.0.1 by a throwaway HTTP server, so the browser loads it as a reader would.
"""

import html
import http.server
import re
import threading


def render(markdown, title):
    """Headings, bullet lists, tables and paragraphs: what markdown-report writes."""
    out, in_list, in_table = [], False, False
    for line in markdown.splitlines():
        stripped = line.strip()
        if in_list and not stripped.startswith(("- ", "* ")):
            out.append("</ul>")
            in_list = False
        if in_table and not stripped.startswith("|"):
            out.append("</table>")
            in_table = False
        heading = re.match(r"(#{1,6})\s+(.*)", stripped)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{html.escape(heading.group(2))}</h{level}>")
        elif stripped.startswith(("- ", "* ")):
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{html.escape(stripped[2:])}</li>")
        elif stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", c) for c in cells):
                continue  # the header separator row
            if not in_table:
                out.append("<table border='1'>")
                in_table = True
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        elif stripped and not stripped.startswith("!["):
            out.append(f"<p>{html.escape(stripped)}</p>")
    out.append("</ul>" if in_list else "")
    out.append("</table>" if in_table else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            "</title></head><body style='font-family: sans-serif; margin: 2em'>"
            + "\n".join(out) + "</body></html>").encode("utf-8")


def serve(body):
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run(page, inputs):
    expected = inputs.get("expected_title", "Git digest")
    server = serve(render(inputs["markdown"], expected))
    try:
        page.goto(f"http://127.0.0.1:{server.server_port}/digest.html")
        heading = page.inner_text("h1").strip()
        sections = [text.strip() for text in page.locator("h2").all_inner_texts()]
        shot = page.screenshot(full_page=True)
    finally:
        server.shutdown()
    return {"heading": heading, "title_ok": heading == expected, "sections": sections,
            "screenshot": shot}
