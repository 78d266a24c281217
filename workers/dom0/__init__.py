"""Browser steps: Playwright on Chromium (see docs/screen-skills.md)."""
