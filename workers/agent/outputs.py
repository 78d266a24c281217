"""An agent step's declared outputs as the typed answer the model must give.

The same contract a script's outputs meet (workers/script_executor.py): every declared
output present, none undeclared, each of its declared type with no coercion (``"3"`` is
not an integer, ``1`` is not a boolean), numbers finite. The model is shown the JSON
schema, descriptions included, so each output's description is its instruction; an
answer that does not fit goes back to the model as a retry, then fails the step.

A skill that declares no outputs (a plain Agent Skills folder) answers in text:
``output_type`` is ``str``, and that text is its one output, ``answer`` (a string:
Manifest.result_outputs), so the answer reaches the person (`skillq run`, run-show, the
dashboard, MCP) and a later step (``${steps.ID.outputs.answer}``) instead of staying in
the transcript.
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    create_model,
    model_validator,
)

from shared.manifest import ANSWER, Manifest
from shared.valuetypes import ValueType, machine_path, unstorable


def _number(value: Any) -> int | float:
    # An int stays an int: a number output may feed an integer input downstream, as a
    # script's would (pydantic's float would turn 3 into 3.0).
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


_FiniteNumber = Annotated[int | float, PlainValidator(_number), WithJsonSchema({"type": "number"})]
_BASE: dict[str, Any] = {
    "string": StrictStr,
    "number": _FiniteNumber,
    "integer": StrictInt,
    "boolean": StrictBool,
    "object": dict[str, Any],
}


class _Outputs(BaseModel):
    # Frozen: a validated answer is a record. Aliases carry the declared names, so an
    # output may be called `json` or `model_fields` without clashing with BaseModel.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False,
                              serialize_by_alias=True, validate_by_alias=True)

    @model_validator(mode="after")
    def _storable(self) -> _Outputs:
        # A model may answer a NUL (\u0000) or a lone surrogate, which the run's record
        # cannot hold: a misfit it is asked to correct, as a wrong type is.
        answer = self.model_dump(mode="json", by_alias=True)
        if problem := unstorable(answer):
            raise ValueError(f"the answer cannot be stored: {problem}")
        if (found := machine_path(answer)) is not None:  # it would reach a later step
            raise ValueError(f"the answer names {found} as a machine's file or folder "
                             "($dir, $local); give the path as text")
        return self


def python_type(vtype: ValueType) -> Any:
    """The annotation that accepts exactly the values of ``vtype`` (``T[]`` -> list)."""
    inner: Any = _BASE[vtype.base]
    for _ in range(vtype.depth):
        inner = list[inner]
    return inner


def output_model(manifest: Manifest, *, anonymous: bool = False) -> type[BaseModel]:
    """A frozen pydantic model with one required field per declared output, named and
    described as declared (an empty model when none are declared); ``anonymous``: not
    named for its skill (an eval's baseline, which loads no skill)."""
    fields: dict[str, Any] = {}
    for i, spec in enumerate(manifest.outputs):
        field = spec.name if _plain(spec.name) else f"output_{i}"
        fields[field] = (python_type(spec.value_type), Field(
            alias=spec.name, title=spec.name, description=spec.description or None))
    model: type[BaseModel] = create_model(
        "Outputs" if anonymous else _class_name(manifest.name), __base__=_Outputs,
        __doc__="The outputs asked for." if anonymous
        else f"The outputs of the skill {manifest.name}.", **fields)
    return model


def output_type(manifest: Manifest, *, anonymous: bool = False
                ) -> type[BaseModel] | type[str]:
    """What the step's agent is asked for: the outputs model, or text without outputs."""
    return output_model(manifest, anonymous=anonymous) if manifest.outputs else str


def outputs_of(answer: BaseModel | str) -> dict[str, Any]:
    """The step's outputs (JSON values, by declared name) from the agent's answer; a text
    answer (no outputs declared) is the one output ``answer``."""
    if isinstance(answer, str):  # text: what the record cannot hold becomes U+FFFD
        return {ANSWER: _UNSTORABLE_CHARS.sub("\ufffd", answer)}
    dumped: dict[str, Any] = answer.model_dump(mode="json", by_alias=True)
    return dumped


_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")  # NUL, lone surrogates


def _plain(name: str) -> bool:
    """Whether ``name`` can be a field's own name (no private, protected or inherited
    attribute of BaseModel); others go by alias only."""
    return not name.startswith(("_", "model_")) and not hasattr(BaseModel, name)


def _class_name(skill: str) -> str:
    name = "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", skill) if part)
    name = f"{name or 'Skill'}Outputs"
    return f"_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name
