"""The skill manifest: SKILL.md frontmatter (and skill.yaml) as frozen, typed data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import TypeAliasType

from shared.agentskills import DISABLE_MODEL_INVOCATION
from shared.mcp_servers import NAME as MCP_SERVER_NAME
from shared.screen_spec import BrowserSpec, DesktopSpec
from shared.valuetypes import ValueType, parse_type

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
STEP_ID = r"[A-Za-z_][A-Za-z0-9_-]*"
SKILL_REF = re.compile(r"(?P<name>[^@\s]+)(@(?P<version>[1-9][0-9]*))?\Z")

# Fields of the Agent Skills specification; everything else is an execution field.
SPEC_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata",
                         "allowed-tools"})


# The spec maps metadata keys to strings, but the reference validator and the clients read
# any YAML there (tags as a list, a client's own nested block), so it loads and is written
# back as it was; scalars stay the text written (SKILL.md's spec fields are read as text).
MetaValue = TypeAliasType(
    "MetaValue", "str | tuple[MetaValue, ...] | Mapping[str, MetaValue] | None")
# A field skillq keeps without reading it (Manifest.kept): any value YAML 1.2 core gives,
# typed as the YAML loader typed it, so an export writes back what was read.
KeptValue = TypeAliasType(
    "KeptValue",
    "str | bool | int | float | tuple[KeptValue, ...] | Mapping[str, KeptValue] | None")
# The one output of an agent step that declares none: its answer, as text.
ANSWER = "answer"


class Approach(StrEnum):
    """The bot0 cost hierarchy, cheapest first; it picks the queue a step runs on."""

    API = "api"
    CODE = "code"
    WEB = "web"
    DOM0 = "dom0"
    CMD0 = "cmd0"
    AGENT = "agent"


class OnFailure(StrEnum):
    ABORT = "abort"
    SKIP = "skip"
    CONTINUE = "continue"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _text(value: Any) -> Any:
    # Cost and duration are labels for people ("$0.00", "5s"); a bare number is fine too.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


Label = Annotated[str, BeforeValidator(_text)]


def _tools(value: Any) -> Any:
    # Checked here so a wrong shape reads as one message, not one per member of the union.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"must be one line of tool names (allowed-tools: Bash(git:*) Read) or a "
                     f"YAML list with one '- Tool' line per tool, got {value!r}")


def _meta(value: Any, where: str = "metadata") -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            _meta(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _meta(item, f"{where}[{i}]")
    elif value is not None and not isinstance(value, str):
        raise ValueError(f"{where} must be text, a list or a mapping, got {value!r}; quote it")
    return value


Tools = Annotated[str | tuple[str, ...] | None, BeforeValidator(_tools)]
Metadata = Annotated[Mapping[str, MetaValue], BeforeValidator(_meta)]

Ident = Annotated[str, Field(pattern=rf"^{IDENT}$")]


class _Typed(Frozen):
    name: Ident
    type: str
    description: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        parse_type(value)
        return value

    @property
    def value_type(self) -> ValueType:
        return parse_type(self.type)


class InputSpec(_Typed):
    required: StrictBool = False
    default: Any = None

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set

    def written(self) -> dict[str, Any]:
        """As a manifest writes it: the fields set otherwise than by default, and its
        default when it has one (a null default too)."""
        return self.model_dump(mode="json", exclude={"default"}, exclude_defaults=True) | (
            {"default": self.default} if self.has_default else {})


class OutputSpec(_Typed):
    from_: str | None = Field(default=None, alias="from")


ANSWER_OUTPUT = OutputSpec(name=ANSWER, type="string", description=(
    "The model's answer, as text (the skill declares no outputs of its own)."))


class RunSpec(Frozen):
    command: str = Field(min_length=1)
    timeout: float = Field(default=300, gt=0, description="seconds")
    retries: StrictInt = Field(default=3, ge=0, le=20)


class Requires(Frozen):
    capabilities: tuple[str, ...] = ()
    software: tuple[str, ...] = ()
    daemon: str | None = None
    # MCP servers whose tools an agent step uses (Composio's `requires: {mcp: [rube]}`):
    # routed to a daemon declaring them (SKILLQ_MCP_SERVERS, shared/mcp_servers.py).
    mcp: tuple[Annotated[str, Field(pattern=rf"^{MCP_SERVER_NAME}$")], ...] = ()


class Limits(Frozen):
    """What one step may use (docs/security.md); unset = the daemon's defaults (settings)."""
    memory_mb: StrictInt | None = Field(default=None, ge=16)
    processes: StrictInt | None = Field(default=None, ge=1, description="processes and "
                                        "threads at once")
    cpu_s: StrictInt | None = Field(default=None, ge=1, description="CPU seconds per process")
    file_mb: StrictInt | None = Field(default=None, ge=1, description="the largest file it "
                                      "may write")
    open_files: StrictInt | None = Field(default=None, ge=16)
    network: StrictBool | None = None


class CacheSpec(Frozen):
    enabled: StrictBool = False
    ttl: StrictInt = Field(default=3600, gt=0, description="seconds")


# The reserved skill an approval step runs (shared/builtin/skillq-approval).
APPROVAL_SKILL = "skillq-approval"
# The reserved skill a skill build runs (shared/builtin/skillq-build): skillq's own step.
BUILD_SKILL = "skillq-build"


class ApprovalSpec(Frozen):
    """An orchestrator step that pauses its run until a person approves or rejects it
    (docs/waits.md). What it shows and its inputs' defaults may be references to earlier
    steps' outputs; the approver's inputs are the step's outputs, which later steps read."""

    message: str = Field(min_length=1)
    show: Mapping[Ident, Any] = Field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()
    timeout: StrictFloat | StrictInt | None = Field(
        default=None, gt=0, description="seconds to wait for a decision (none: no limit)")
    on_timeout: Literal["reject", "approve"] = "reject"


class Step(Frozen):
    id: Annotated[str, Field(pattern=rf"^{STEP_ID}$")]
    skill: str = ""  # empty for an approval step, which runs APPROVAL_SKILL
    for_each: Any = None
    with_: Mapping[str, Any] = Field(default_factory=dict, alias="with")
    on_failure: OnFailure = OnFailure.ABORT
    needs: tuple[str, ...] = ()
    approval: ApprovalSpec | None = None

    @field_validator("skill")
    @classmethod
    def _skill_ref(cls, value: str) -> str:
        if value and not SKILL_REF.match(value):
            raise ValueError(f"'{value}' is not a skill reference; write NAME or NAME@VERSION")
        return value

    @model_validator(mode="after")
    def _skill_or_approval(self) -> Step:
        if self.approval is None:
            if not self.skill:
                raise ValueError("a step needs `skill: NAME` (or an `approval:` block)")
        elif self.skill or self.with_ or self.for_each is not None:
            raise ValueError("an approval step takes no skill, with or for_each: what it "
                             "shows goes under approval.show, what it asks under "
                             "approval.inputs")
        return self

    @property
    def approval_values(self) -> dict[str, Any]:
        """An approval step's values that may reference earlier steps: what it shows,
        and its inputs' defaults ({} for any other step)."""
        if self.approval is None:
            return {}
        return {"show": dict(self.approval.show),
                "inputs": {i.name: i.default for i in self.approval.inputs if i.has_default}}

    @property
    def skill_name(self) -> str:
        if self.approval is not None:
            return APPROVAL_SKILL
        match = SKILL_REF.match(self.skill)
        return match["name"] if match else self.skill

    @property
    def skill_version(self) -> int | None:
        if self.approval is not None:
            return None
        match = SKILL_REF.match(self.skill)
        return int(match["version"]) if match and match["version"] else None


class Manifest(Frozen):
    # Agent Skills specification fields.
    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: Metadata = Field(default_factory=dict)
    # One space-separated line in the spec; Claude Code also reads a YAML list of tools.
    allowed_tools: Tools = Field(default=None, alias="allowed-tools")
    # Claude Code's: true keeps the skill out of every model's catalog (agent steps,
    # `skillq ask`, `skillq catalog`, MCP's listing); a person still runs it by name.
    disable_model_invocation: StrictBool = Field(default=False, alias=DISABLE_MODEL_INVOCATION)
    # SKILL.md fields skillq does not use (Claude Code's others; in a plain folder, any it
    # does not know), as written: exported back unchanged (orchestrator/forms.py), never
    # read. Set by shared/kept_fields.py, never from a key of the file.
    kept: Mapping[str, KeptValue] = Field(default_factory=dict, exclude=True)
    # Execution fields (the bot0 design).
    version: StrictInt = Field(default=1, ge=1)
    label: str | None = None
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    approach: Approach | None = None
    run: RunSpec | None = None
    steps: tuple[Step, ...] | None = None
    auth: tuple[Annotated[str, Field(pattern=rf"^{IDENT}$")], ...] = ()
    requires: Requires = Requires()
    tools_used: tuple[str, ...] = ()
    model: str | None = None
    model_override: StrictBool = False
    # Agent steps (docs/agent-steps.md): the skills the model may load and run (its
    # sub-skills.json by default, so the declared DAG stays what runs), and its limits.
    catalog: Literal["sub-skills", "all"] = "sub-skills"
    # An agent step may ask a person (ask_question) even when its run was not started by
    # someone at hand (a schedule's run never waits for anyone: docs/waits.md).
    interactive: StrictBool = False
    question_timeout: StrictFloat | StrictInt | None = Field(
        default=None, gt=0, description="seconds its questions wait for an answer (unset: "
        "SKILLQ_QUESTION_TIMEOUT_S)")
    max_turns: StrictInt | None = Field(default=None, ge=1)
    budget_usd: StrictFloat | None = Field(default=None, gt=0, allow_inf_nan=False)
    timeout: StrictFloat | StrictInt | None = Field(default=None, gt=0,
                                                    description="seconds an agent step runs")
    estimated_cost: Label | None = None
    estimated_duration: Label | None = None
    cache: CacheSpec = CacheSpec()
    limits: Limits = Limits()
    # Screen steps declared as actions (docs/screen-skills.md): dom0 and cmd0 only.
    browser: BrowserSpec | None = None
    desktop: DesktopSpec | None = None

    @field_validator("requires")
    @classmethod
    def _mcp_is_for_agent_steps(cls, value: Requires, info: ValidationInfo) -> Requires:
        # Only a model calls tools: a script, screen actions or an orchestrator given MCP
        # servers would be routed for them and never use them. (approach, run and steps
        # come before requires, so they are read here; screen steps set an approach.)
        approach = info.data.get("approach")
        leaf = info.data.get("run") is None and info.data.get("steps") is None
        if value.mcp and not (leaf and approach in (None, Approach.AGENT)):
            raise ValueError("mcp: only an agent step (approach: agent, no run, steps or "
                             "screen actions) uses MCP servers' tools; remove requires.mcp, "
                             "or put it on the agent skill whose model calls them")
        return value

    @property
    def is_orchestrator(self) -> bool:
        return self.steps is not None

    @property
    def calling_steps(self) -> tuple[Step, ...]:
        """The steps that call a skill of the vault (not approval steps)."""
        return tuple(s for s in self.steps or () if s.approval is None)

    @property
    def effective_approach(self) -> Approach:
        """The queue class of a leaf: as declared, else code for a script, else agent."""
        if self.approach is not None:
            return self.approach
        return Approach.CODE if self.run is not None else Approach.AGENT

    @property
    def kind(self) -> str:
        if self.is_orchestrator:
            return "orchestrator"
        # A leaf a worker runs: a script, or browser/desktop actions.
        runnable = (self.run, self.browser, self.desktop) != (None, None, None)
        return "script" if runnable else "instructions"

    @property
    def display_label(self) -> str:
        return self.label or self.name.replace("-", " ").title()

    def input(self, name: str) -> InputSpec | None:
        return next((i for i in self.inputs if i.name == name), None)

    @property
    def answers_in_text(self) -> bool:
        """An agent leaf that declares no outputs: its answer is its one output, ``answer``
        (a plain Agent Skills folder, say), so what the model says reaches the person."""
        return not self.outputs and self.kind == "instructions" and \
            self.effective_approach is Approach.AGENT

    @property
    def result_outputs(self) -> tuple[OutputSpec, ...]:
        """The outputs a run of it returns: the declared ones, or ``answer``."""
        return (ANSWER_OUTPUT,) if self.answers_in_text else self.outputs

    def output(self, name: str) -> OutputSpec | None:
        return next((o for o in self.result_outputs if o.name == name), None)

    @property
    def allowed_tool_names(self) -> tuple[str, ...]:
        """``allowed-tools`` one tool a member: a YAML list as written, a line split at
        spaces and commas outside parentheses (``Bash(git diff *) Read``)."""
        if self.allowed_tools is None or isinstance(self.allowed_tools, tuple):
            return tuple(t.strip() for t in self.allowed_tools or () if t.strip())
        names, depth, current = [], 0, ""
        for char in self.allowed_tools:
            depth += (char == "(") - (char == ")")
            if depth <= 0 and (char.isspace() or char == ","):
                depth = 0
                if current:
                    names.append(current)
                current = ""
            else:
                current += char
        return (*names, current) if current else tuple(names)


# SKILL.md's fields in either form: the spec's, and Claude Code's that skillq honours
# (where Claude Code reads them, so an export keeps them there).
FRONTMATTER_FIELDS = SPEC_FIELDS | {DISABLE_MODEL_INVOCATION}
EXECUTION_FIELDS = frozenset(
    (f.alias or name) for name, f in Manifest.model_fields.items()
) - FRONTMATTER_FIELDS - {"kept"}
KNOWN_FIELDS = FRONTMATTER_FIELDS | EXECUTION_FIELDS
