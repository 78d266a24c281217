"""The ``browser:`` (dom0) and ``desktop:`` (cmd0) fields of a manifest: steps that need
a screen, declared as a list of actions instead of a script.

Each action is a one-key mapping, the key naming what it does::

    browser:
      actions:
        - goto: ${inputs.url}
        - fill:
            selector: "#name"
            value: ${inputs.name}
        - click: "button[type=submit]"
        - extract:
            selector: "#result"
            output: message

A bare string stands for the action's main field (the selector, the url, the text).
String fields may hold ``${inputs.NAME}`` references; a ``goto`` url, a ``fill`` value
and a ``type`` text may also hold ``${secrets.NAME}`` of a secret the skill declares
under ``auth`` (shared/screen_secrets.py); ``output`` names an output.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)


class Frozen(BaseModel):  # as shared.manifest.Frozen, which imports this module
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


Ident = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Seconds = Annotated[float, Field(gt=0, description="seconds")]
Text = Annotated[str, Field(min_length=1)]


def _shorthand(key: str) -> BeforeValidator:
    """``click: "#ok"`` means ``click: {selector: "#ok"}``."""
    return BeforeValidator(lambda value: {key: value} if isinstance(value, str) else value)


# -- browser ---------------------------------------------------------------------------

class Goto(Frozen):
    url: Text
    wait_until: Literal["load", "domcontentloaded", "networkidle", "commit"] = "load"
    timeout: Seconds | None = None


class Click(Frozen):
    selector: Text
    timeout: Seconds | None = None


class Fill(Frozen):
    selector: Text
    value: str
    timeout: Seconds | None = None


class Press(Frozen):
    key: Text  # Playwright key names: Enter, Tab, Control+A ...
    selector: Text | None = None  # None: the focused element
    timeout: Seconds | None = None


class WaitFor(Frozen):
    selector: Text
    state: Literal["attached", "detached", "visible", "hidden"] = "visible"
    timeout: Seconds | None = None


class Extract(Frozen):
    selector: Text
    output: Ident
    attribute: Text | None = None  # None: the element's text
    all: StrictBool = False  # every match, as a list, instead of the first
    timeout: Seconds | None = None


class Shot(Frozen):
    output: Ident
    selector: Text | None = None  # None: the viewport (or the page, with full_page)
    full_page: StrictBool = False
    timeout: Seconds | None = None


class _OneOf(Frozen):
    """Exactly one field set: the action's kind is that field's name."""

    @model_validator(mode="after")
    def _exactly_one(self) -> _OneOf:
        kinds = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(kinds) != 1:
            names = ", ".join(type(self).model_fields)
            got = f"got {', '.join(kinds)}" if kinds else "got none"
            raise ValueError(f"an action is one of {names}: write one of them per list "
                             f"item ({got})")
        return self

    @property
    def kind(self) -> str:
        return next(n for n in type(self).model_fields if getattr(self, n) is not None)

    @property
    def body(self) -> Any:
        return getattr(self, self.kind)


class BrowserAction(_OneOf):
    goto: Annotated[Goto | None, _shorthand("url")] = None
    click: Annotated[Click | None, _shorthand("selector")] = None
    fill: Fill | None = None
    press: Annotated[Press | None, _shorthand("key")] = None
    wait_for: Annotated[WaitFor | None, _shorthand("selector")] = None
    extract: Extract | None = None
    screenshot: Annotated[Shot | None, _shorthand("output")] = None


class BrowserSpec(Frozen):
    """A dom0 step: Playwright on Chromium, one fresh browser context per step."""

    actions: tuple[BrowserAction, ...] | None = None
    script: Text | None = None  # a .py file in the skill folder with run(page, inputs) -> dict
    timeout: Seconds = 120.0  # the whole step; everything is killed past it
    action_timeout: Seconds = 10.0  # each action, unless the action sets its own
    viewport: tuple[StrictInt, StrictInt] = (1280, 800)  # width, height in pixels


# -- desktop ---------------------------------------------------------------------------

class Target(Frozen):
    """Where a pointer action lands: a template image found on screen, or coordinates."""

    image: Text | None = None  # a PNG in the skill folder, matched against the screen
    x: StrictInt | None = None
    y: StrictInt | None = None
    confidence: Annotated[float, Field(gt=0, le=1)] | None = None
    timeout: Seconds | None = None  # how long to look for the image

    @model_validator(mode="after")
    def _where(self) -> Target:
        by_image, by_point = self.image is not None, (self.x, self.y) != (None, None)
        if by_image == by_point or (by_point and None in (self.x, self.y)):
            raise ValueError("give either image (a template file in the skill folder) or "
                             "both x and y (screen coordinates)")
        return self


class TypeText(Frozen):
    text: str
    interval: Annotated[float, Field(ge=0, le=1)] = 0.0  # seconds between keys


class Hotkey(Frozen):
    keys: tuple[Text, ...] = Field(min_length=1)


def _keys(value: Any) -> Any:
    """``hotkey: ctrl+s`` and ``hotkey: [ctrl, s]`` both mean keys [ctrl, s]."""
    if isinstance(value, str):
        return {"keys": [k.strip() for k in value.split("+")]}
    if isinstance(value, list | tuple):
        return {"keys": value}
    return value


class ImageWait(Frozen):
    image: Text
    confidence: Annotated[float, Field(gt=0, le=1)] | None = None
    timeout: Seconds | None = None


class Locate(ImageWait):
    output: Ident


class ScreenShot(Frozen):
    output: Ident


class DesktopAction(_OneOf):
    click: Annotated[Target | None, _shorthand("image")] = None
    double_click: Annotated[Target | None, _shorthand("image")] = None
    type: Annotated[TypeText | None, _shorthand("text")] = None
    hotkey: Annotated[Hotkey | None, BeforeValidator(_keys)] = None
    wait_for: Annotated[ImageWait | None, _shorthand("image")] = None
    locate: Locate | None = None
    screenshot: Annotated[ScreenShot | None, _shorthand("output")] = None


class DesktopSpec(Frozen):
    """A cmd0 step: pointer and keyboard on the worker's X display (pyautogui)."""

    actions: tuple[DesktopAction, ...] = Field(min_length=1)
    timeout: Seconds = 120.0  # the whole step
    action_timeout: Seconds = 10.0  # how long an image is looked for, unless the action says
    confidence: Annotated[float, Field(gt=0, le=1)] = 0.9  # template match threshold
    pause: Annotated[float, Field(ge=0, le=5)] = 0.05  # seconds after each action


ScreenAction = BrowserAction | DesktopAction

# What each action's ``output`` produces, as a declared output type.
OUTPUT_TYPES = {"extract": "string", "screenshot": "object", "locate": "object"}


def produced_outputs(actions: tuple[ScreenAction, ...]) -> Iterator[tuple[int, str, str]]:
    """(action index, output name, the type it produces) for every producing action."""
    for i, action in enumerate(actions):
        name = getattr(action.body, "output", None)
        if name is None:
            continue
        kind = OUTPUT_TYPES[action.kind]
        if isinstance(action.body, Extract) and action.body.all:
            kind = "string[]"
        yield i, name, kind
