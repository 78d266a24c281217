"""A run's plan: the frozen, typed steps a pipeline run executes, stored with the run.

A leaf skill run directly is a plan of one step; an orchestrator's steps are copied
with what the planner needs at run time (queue, fan-out, which outputs are arrays),
so a run keeps going the same way even if the vault changes under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from shared.manifest import APPROVAL_SKILL, BUILD_SKILL, Frozen, Manifest, OnFailure, Requires, Step
from shared.queues import CONTROL_QUEUE, queue_for
from shared.skill import Skill
from shared.stepgraph import step_dependencies

StepKind = Literal["script", "orchestrator", "instructions", "approval", "build"]


class AgentModel(Frozen):
    """An agent step's model as its skill declares it. Which model it runs on also
    depends on the daemon's default (shared/model_spec.effective_model), so routing
    resolves it per daemon, against the providers each one announced."""

    model: str | None = None
    override: bool = False  # the skill's model_override
    requested: str | None = None  # the model an execute_skill call asked for
    budget_usd: float | None = None  # a cap its caller set (a build's share of its budget)
    # an eval's `--baseline none`: the same request to the same model, no skill loaded
    bare: bool = False

    def ref_args(self, daemon_default: str | None) -> tuple[str | None, bool, str | None,
                                                          str | None]:
        """effective_model's arguments, in its order."""
        return self.model, self.override, daemon_default, self.requested


class PlanStep(Frozen):
    id: str
    skill: str
    version: int
    kind: StepKind
    queue: str
    for_each: Any = None
    with_: Mapping[str, Any] = Field(default_factory=dict, alias="with")
    on_failure: OnFailure = OnFailure.ABORT
    after: tuple[str, ...] = ()  # every step it waits for (references and needs)
    array_outputs: tuple[str, ...] = ()
    retries: int = 0
    timeout_s: float | None = None
    # ``version`` came from a ``NAME@V`` pin (workers/published.py runs V from the store
    # when the vault holds another version), not from the vault at run start.
    pinned: bool = False
    requires: Requires = Requires()  # where it may run: routed at launch (routing.py)
    agent: AgentModel | None = None  # set for an agent step (kind instructions)

    @property
    def fans_out(self) -> bool:
        return self.for_each is not None


class Plan(Frozen):
    skill: str
    version: int
    steps: tuple[PlanStep, ...]
    outputs: Mapping[str, str] = Field(default_factory=dict)  # output name -> reference
    outputs_of: str | None = None  # a leaf run's outputs are this step's outputs
    # The caller's working directory: scripts resolve relative paths against it
    # (SKILLQ_WORKDIR), where it exists on the machine running them.
    workdir: str | None = None

    def step(self, step_id: str) -> PlanStep:
        return next(s for s in self.steps if s.id == step_id)

    def with_requested_model(self, model: str) -> Plan:
        """The plan with its agent steps asked to run on ``model`` (execute_skill's
        ``model``: the skill's model_override still wins, effective_model)."""
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"agent": s.agent.model_copy(update={"requested": model})})
            if s.agent is not None else s for s in self.steps)})

    def with_budget(self, usd: float | None) -> Plan:
        """The plan with its agent steps' turns capped at ``usd`` each (their skill's own
        budget_usd, if lower, still holds); as it is for None."""
        if usd is None:
            return self
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"agent": s.agent.model_copy(update={"budget_usd": usd})})
            if s.agent is not None else s for s in self.steps)})

    def bare(self) -> Plan:
        """The plan with its agent steps sent as the same request to the same model with
        no skill loaded: no instructions, no catalog, no files (an eval's baseline)."""
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"agent": s.agent.model_copy(update={"bare": True})})
            if s.agent is not None else s for s in self.steps)})

    def at_version(self, skill: str, version: int) -> Plan:
        """The plan with ``skill``'s steps pinned to its published ``version`` (workers
        run it from the store, as for a ``NAME@V`` pin)."""
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"version": version, "pinned": True}) if s.skill == skill
            else s for s in self.steps)})

    def pinned_to(self, daemon: str | None) -> Plan:
        """The plan with every step pinned to ``daemon`` (a build's `--daemon`: each of
        its stages runs there); as it is for None."""
        if not daemon:
            return self
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"requires": s.requires.model_copy(
                update={"daemon": daemon})}) for s in self.steps)})

    def with_mcp_servers(self, names: Sequence[str]) -> Plan:
        """The plan with its agent steps given the tools of MCP servers ``names`` too, and
        routed by them (`skillq ask`'s: the servers the skills a person invoked require)."""
        def more(r: Requires) -> Requires:
            return r.model_copy(update={"mcp": tuple(dict.fromkeys((*r.mcp, *names)))})
        return self.model_copy(update={"steps": tuple(
            s.model_copy(update={"requires": more(s.requires)}) if s.agent is not None
            else s for s in self.steps)})


def _queue(callee: Manifest) -> str:
    return CONTROL_QUEUE if callee.is_orchestrator else str(queue_for(callee.effective_approach))


def _plan_step(step_id: str, callee: Skill, **fields: Any) -> PlanStep:
    m = callee.manifest
    if m.name == BUILD_SKILL:  # skillq's own step (workers/build/): no model of its own
        return PlanStep.model_validate({"id": step_id, "skill": m.name, "version": m.version,
                                        "kind": "build", "queue": CONTROL_QUEUE, **fields})
    return PlanStep.model_validate({
        "id": step_id, "skill": callee.name, "version": m.version, "kind": m.kind,
        "queue": _queue(m),
        "array_outputs": tuple(o.name for o in m.outputs if o.value_type.is_array),
        "retries": m.run.retries if m.run else 0,
        "timeout_s": m.run.timeout if m.run else None, "requires": m.requires,
        "agent": AgentModel(model=m.model, override=m.model_override)
        if m.kind == "instructions" else None, **fields})


def _approval_step(step: Step, after: tuple[str, ...]) -> PlanStep:
    """An approval step: run on the control queue by workers/executors/approval.py, its
    ``with`` what the planner resolves (the message, what it shows, the inputs'
    defaults) beside what it takes as it is (the approver's form, the timeout)."""
    spec = step.approval
    assert spec is not None
    form = [i.model_dump(mode="json", exclude={"default"}, exclude_defaults=True)
            for i in spec.inputs]
    return PlanStep.model_validate({
        "id": step.id, "skill": APPROVAL_SKILL, "version": 1, "kind": "approval",
        "queue": CONTROL_QUEUE, "on_failure": step.on_failure, "after": after,
        "array_outputs": tuple(i.name for i in spec.inputs if i.value_type.is_array),
        "with": {"message": spec.message, "show": dict(spec.show),
                 "defaults": {i.name: i.default for i in spec.inputs if i.has_default},
                 "form": form, "timeout_s": spec.timeout, "on_timeout": spec.on_timeout}})


def build_plan(skill: Skill, skills: Mapping[str, Skill], given: Mapping[str, Any],
               workdir: str | None = None) -> Plan:
    """The plan for running ``skill`` with inputs ``given`` (already checked)."""
    m = skill.manifest
    if not m.is_orchestrator:
        step = _plan_step(skill.name, skill,
                          **{"with": {k: f"${{inputs.{k}}}" for k in given}})
        return Plan(skill=skill.name, version=m.version, steps=(step,), outputs_of=skill.name,
                    workdir=workdir)
    deps = step_dependencies(m)
    # A pinned step's queue, kind and outputs are read from the vault's current version
    # of the callee: pinning is for versions of the same interface.
    steps = tuple(
        _approval_step(s, tuple(deps[s.id])) if s.approval is not None else
        _plan_step(s.id, skills[s.skill_name], for_each=s.for_each,
                   on_failure=s.on_failure, after=tuple(deps[s.id]),
                   **{"with": dict(s.with_)},
                   **({"version": s.skill_version, "pinned": True} if s.skill_version else {}))
        for s in m.steps or ())
    outputs = {o.name: o.from_ for o in m.outputs if o.from_ is not None}
    return Plan(skill=skill.name, version=m.version, steps=steps, outputs=outputs,
                workdir=workdir)
