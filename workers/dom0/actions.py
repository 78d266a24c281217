"""Running a list of browser actions on a Playwright page.

Each action arrives resolved (references filled in, secrets as markers naming them) as
``{"kind": ..., **fields}``; a failure is a HostError naming the action's place in
``browser.actions``, its kind and its selector, never a secret's value.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from shared.screen_secrets import SecretRefError, filled, spelled
from shared.secrets import redact
from workers.screen.host import HostError, Secrets, Workspace, action_error, first_line

FIELD = "browser"


def run_actions(page: Page, actions: list[dict[str, Any]], workspace: Workspace,
                default_timeout_s: float, secrets: Secrets) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    for index, action in enumerate(actions):
        kind = action["kind"]
        # As the manifest spells it: a url holding a secret shows ${secrets.NAME}.
        target = action.get("selector") or spelled(action.get("url"))
        workspace.doing(f"{FIELD}.actions[{index}] ({kind} {target!r})" if target
                        else f"{FIELD}.actions[{index}] ({kind})")
        timeout_ms = 1000 * (action.get("timeout") or default_timeout_s)
        try:
            # The secrets' values join the action only now, and only in memory.
            value = _ACTIONS[kind](page, filled(action, secrets), timeout_ms, workspace)
        except PlaywrightError as exc:
            # Playwright's message may quote what it was given (a url, say): redacted.
            detail = redact(_explain(exc, timeout_ms), secrets)
            raise action_error(FIELD, index, kind, detail, target) from None
        except (HostError, SecretRefError) as exc:
            raise action_error(FIELD, index, kind, redact(str(exc), secrets),
                               target) from None
        if "output" in action:
            outputs[action["output"]] = value
    return outputs


def _explain(exc: PlaywrightError, timeout_ms: float) -> str:
    text = first_line(exc)
    if "Timeout" in text and "exceeded" in text:
        return (f"nothing matched within {timeout_ms / 1000:g} s (no such element, or it "
                "never became ready); check the selector against the page")
    return text


def _goto(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> None:
    response = page.goto(a["url"], wait_until=a.get("wait_until", "load"), timeout=timeout_ms)
    if response is not None and response.status >= 400:
        raise HostError(f"the page answered HTTP {response.status}")


def _click(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> None:
    page.click(a["selector"], timeout=timeout_ms)


def _fill(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> None:
    page.fill(a["selector"], a["value"], timeout=timeout_ms)


def _press(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> None:
    if a.get("selector"):
        page.press(a["selector"], a["key"], timeout=timeout_ms)
    else:
        page.keyboard.press(a["key"])


def _wait_for(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> None:
    page.wait_for_selector(a["selector"], state=a.get("state", "visible"), timeout=timeout_ms)


def _extract(page: Page, a: dict[str, Any], timeout_ms: float, _: Workspace) -> Any:
    selector, attribute = a["selector"], a.get("attribute")
    page.wait_for_selector(selector, state="attached", timeout=timeout_ms)
    elements = page.query_selector_all(selector) if a.get("all") else \
        [page.query_selector(selector)]
    values = []
    for element in elements:
        if element is None:
            raise HostError("the element went away before it could be read")
        value = element.inner_text() if attribute is None else element.get_attribute(attribute)
        if value is None:
            raise HostError(f"the element has no attribute '{attribute}'")
        values.append(value.strip())
    return values if a.get("all") else values[0]


def _screenshot(page: Page, a: dict[str, Any], timeout_ms: float, ws: Workspace) -> Any:
    if a.get("selector"):
        data = page.locator(a["selector"]).first.screenshot(timeout=timeout_ms)
    else:
        data = page.screenshot(full_page=bool(a.get("full_page")), timeout=timeout_ms)
    return ws.save(data, "image/png")


_ACTIONS = {"goto": _goto, "click": _click, "fill": _fill, "press": _press,
            "wait_for": _wait_for, "extract": _extract, "screenshot": _screenshot}
