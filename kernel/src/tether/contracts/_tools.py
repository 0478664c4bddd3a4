"""The tool contract: what a tool is (its name, schema and function), the context it runs in,
what it returns, the sources that list tools while something runs, and the filter that restricts
them. A tool checks its own parameters schema when it is made (:func:`schema_problem`, kept per
process) and its arguments when it is called."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread

from ..errors import AgentError, ErrorCode
from ._messages import ImagePart, ToolSchema

if TYPE_CHECKING:
    from ..agents import Agent
    from ..runtime import Runtime

__all__ = (
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFilter",
    "ToolFunction",
    "ToolOutput",
    "ToolSource",
    "kernel_schema",
    "schema_problem",
)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

ToolFunction = Callable[[dict[str, Any], "ToolContext"], "Awaitable[str] | str"]


class ToolError(Exception):
    """Raise from a tool to fail the call with exactly this text (the model sees
    ``error: TEXT``); any other exception is shown with its type name."""


class ToolOutput(str):
    """A tool's text with images next to it: return ``ToolOutput(text, images=[...])`` from a
    tool's ``run`` (it is a ``str``, so everything that reads results as text still does).

    The images are logged with the result and shown to models that take images
    (``accepts_images``); other models read the text and a note saying how many images they
    are not shown. Write the text so that it stands alone (what each image is).
    """

    images: tuple[ImagePart, ...]

    def __new__(cls, text: str, images: Iterable[ImagePart] = ()) -> ToolOutput:
        output = super().__new__(cls, text)
        output.images = tuple(images)
        return output


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know: the calling agent and the call."""

    agent: Agent
    call_id: str
    tool: str = ""
    """The name of the tool called (as the model called it)."""

    def progress(self, text: str) -> None:
        """Tell whoever watches the agent how the call is going (``3/5 indexing``): a
        ``tool_progress`` delta (:class:`tether.models.ModelDelta`) to the agent's delta
        listeners (``tether run`` prints it on standard error); nothing when nobody listens.
        Never stored, never shown to the model. Call it on the event loop (any task)."""
        self.agent.loop.tool_progress(self.call_id, self.tool, text)


@dataclass(frozen=True)
class Tool:
    """A model-facing tool: name, description, JSON Schema parameters and the function to run.

    ``safe`` tools have no side effects that could conflict and may run concurrently with the
    other safe calls of the same step; the rest run one at a time in call order. A tool that
    raises becomes an error result the model sees. A sync ``run`` is called in a worker thread
    (see :meth:`call`), so it must not use the agent or other event-loop objects directly: a
    tool that does is written ``async``.
    """

    name: str
    description: str
    run: ToolFunction = field(repr=False)
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    safe: bool = False
    needs_approval: bool = False
    """Run only when the calling agent's approval policy allows it (see
    :mod:`tether.agents` approvals): ``ask`` asks the kernel's permission host."""
    keep_on_restrict: bool = False
    """A control tool a continuable child keeps whatever its tool filter says (``report``)."""
    idempotent: bool = False
    """Running it again with the same arguments does no harm (a read, a lookup, a pure
    computation). When a crash cuts a step whose open calls are all idempotent, the next
    driver runs them again and goes on with the turn; any other cut call is answered
    "interrupted, may or may not have run" and its turn ends ``aborted`` (never run twice)."""
    available: Callable[[Agent], bool] | None = field(default=None, repr=False, compare=False)
    """When given, the tool is in an agent's tool list (and callable) only while
    ``available(agent)`` is true, e.g. the delegation tool while its provider is registered.
    It is asked before every model request, so it must be cheap."""
    _validator: Any = field(default=None, init=False, repr=False, compare=False)
    """The parameters' jsonschema validator (jsonschema's validators are untyped)."""
    _flat: _FlatSchema | None = field(default=None, init=False, repr=False, compare=False)
    _is_async: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f"tool name {self.name!r} is not valid",
                remedy="use 1-64 letters, digits, '_' or '-' (what model APIs accept)",
            )
        if self.parameters.get("type") != "object":
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'tool "{self.name}" parameters must be a JSON Schema with "type": "object"',
                remedy='wrap the arguments in {"type": "object", "properties": {...}}',
            )
        problem = schema_problem(self.parameters)
        if problem is not None:
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'tool "{self.name}" parameters are not a valid JSON Schema: {problem}',
                remedy="fix the schema",
            )
        object.__setattr__(self, "_flat", _flat_schema(self.parameters))
        object.__setattr__(self, "_is_async", inspect.iscoroutinefunction(self.run))

    def schema(self) -> ToolSchema:
        """What the model is told about this tool."""
        return ToolSchema(
            name=self.name, description=self.description, parameters=dict(self.parameters)
        )

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """Why ``arguments`` do not match the schema (empty when they do)."""
        flat = self._flat
        if flat is not None and flat.accepts(arguments):
            return []  # the common case, without jsonschema's descent
        validator: Any = self._validator
        if validator is None:  # made on the first call the quick check does not accept
            import jsonschema

            validator = jsonschema.Draft202012Validator(dict(self.parameters))
            object.__setattr__(self, "_validator", validator)
        return [
            f"{'/'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
            for error in validator.iter_errors(dict(arguments))
        ]

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Run the tool and return its text result.

        A sync function always runs in a worker thread, so the event loop stays free while it
        works (other safe calls, other agents, Ctrl-C), and a cancelled call does not wait for
        it: the call is abandoned at once, the function finishes in its thread and its result
        is dropped.
        """
        if not self._is_async:
            # The hop costs tens of microseconds; a turn that cannot stop costs more.
            result = await anyio.to_thread.run_sync(
                self.run, arguments, context, abandon_on_cancel=True
            )
        else:
            result = self.run(arguments, context)
        if inspect.isawaitable(result):
            result = await result
        # A tool that returns something else than its contract's text is shown as its str().
        outcome = cast(object, result)
        return outcome if isinstance(outcome, str) else str(outcome)


@dataclass(frozen=True)
class ToolSource:
    """Tools that exist while something runs (an MCP server), listed when an agent is composed.

    ``list_tools(runtime)`` returns the source's tools as they are now. The runtime calls it
    each time it composes an agent that sees the source (:meth:`tether.runtime.Runtime.tools`)
    and merges the result into that agent's tool list, in the layer of the plugin instance
    that offered the source; the agent's list then stays fixed for its session. A source
    returns the *same* sequence object while its tools are unchanged, and the runtime reuses
    the merged list (composing stays cheap); a new object is a new list for agents composed
    from then on. It raises a :class:`tether.TetherError` when it cannot list (the compose
    fails with it); anything else is reported as ``TOOL_SOURCE_FAILED``.

    A ``list_tools`` that takes a ``caller`` keyword (``async def list_tools(runtime, *,
    caller=None)``) is given who the agent is composed for (a :class:`~tether.contracts.Caller`,
    or ``None``; docs/callers.md): the session's initiator for a new session. Whether it takes
    one is read once per function; one without is called as before.

    ``eager`` sources are listed as soon as :meth:`tether.runtime.Runtime.open` opens (in its
    task group; a failure there is dropped, and the first compose that needs the source lists
    it again and raises what fails then) and by ``tether check``; the others on first use.
    """

    name: str
    """Names the source in errors and listings (``mcp:time``)."""
    list_tools: Callable[[Runtime], Awaitable[Sequence[Tool]]] = field(repr=False)
    """``async (runtime) -> tools``, or ``async (runtime, *, caller=None) -> tools``."""
    eager: bool = False
    description: str = ""


@dataclass(frozen=True)
class ToolFilter:
    """Which tools a restricted registry keeps: ``allow`` (if given) minus ``deny``."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    def permits(self, name: str) -> bool:
        """Whether the filter keeps the tool ``name``."""
        return (self.allow is None or name in self.allow) and name not in self.deny

    def narrow(self, other: ToolFilter | None) -> ToolFilter:
        """What both filters permit (``other`` may be ``None``: this filter)."""
        if other is None:
            return self
        if self.allow is None or other.allow is None:
            allow = self.allow if other.allow is None else other.allow
        else:
            allow = self.allow & other.allow
        return ToolFilter(allow=allow, deny=self.deny | other.deny)

    def names(self) -> frozenset[str]:
        """Every tool name the filter mentions, allowed or denied."""
        return (self.allow or frozenset()) | self.deny

    def check_names(self, known: Iterable[str], *, available: Iterable[str] | None = None) -> None:
        """Raise ``TOOL_FILTER_INVALID`` when the filter names a tool outside ``known`` (a
        misspelt name would silently deny or allow nothing). A name that is known but gone
        from the tools at hand is fine: narrowing what is already gone changes nothing.
        ``available`` is what the remedy lists (``known`` when not given)."""
        known = set(known)
        unknown = sorted(self.names() - known)
        if unknown:
            listed = sorted(known) if available is None else list(available)
            raise AgentError(
                ErrorCode.TOOL_FILTER_INVALID,
                f"tool filter names unknown tool(s): {', '.join(unknown)}",
                remedy=f"available tools: {', '.join(listed) or 'none'}",
            )

    def as_data(self) -> dict[str, list[str] | None]:
        """``{"allow": [...] | None, "deny": [...]}``, sorted (for logs and descriptors)."""
        return {
            "allow": sorted(self.allow) if self.allow is not None else None,
            "deny": sorted(self.deny),
        }

    def __post_init__(self) -> None:
        if self.allow is None and not self.deny:
            raise AgentError(
                ErrorCode.TOOL_FILTER_INVALID,
                "a tool filter must allow or deny something",
                remedy="give allow = [...] and/or deny = [...], or no filter at all",
            )


# JSON Schema type -> the Python types a json.loads value of that type has (bool is not a number).
_FLAT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "object": (dict,),  # no other keyword is allowed on a flat property: any object
    "array": (list,),
}
#: Annotations: keywords that never change whether a value is valid (JSON Schema 2020-12,
#: meta-data vocabulary), which generated schemas (pydantic's, the MCP SDKs') are full of.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)
_FLAT_PROPERTY_KEYS = frozenset({"type", "enum"}) | _ANNOTATIONS
_FLAT_SCHEMA_KEYS = (
    frozenset({"type", "properties", "required", "additionalProperties"}) | _ANNOTATIONS
)


@dataclass(frozen=True)
class _FlatSchema:
    """A quick yes for the common tool schema: an object of scalar properties.

    It only ever says "valid" when the full validator would; anything it is not sure of goes to
    jsonschema, which also writes the error messages.
    """

    types: Mapping[str, tuple[type, ...]]
    enums: Mapping[str, tuple[Any, ...]]
    required: frozenset[str]
    closed: bool

    def accepts(self, arguments: Mapping[str, Any]) -> bool:
        if not self.required <= arguments.keys():
            return False
        for name, value in arguments.items():
            types = self.types.get(name)
            if types is None:
                if self.closed:
                    return False
                continue
            if type(value) not in types:  # exact types: bool is not an int here
                return False
            enum = self.enums.get(name)
            if enum is not None and value not in enum:
                return False
        return True


def _flat_schema(schema: Mapping[str, Any]) -> _FlatSchema | None:
    """The quick check for ``schema``, or ``None`` when it is not a flat object schema."""
    if not schema.keys() <= _FLAT_SCHEMA_KEYS:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if not isinstance(additional, bool):
        return None
    types: dict[str, tuple[type, ...]] = {}
    enums: dict[str, tuple[Any, ...]] = {}
    for name, value in cast("Mapping[str, object]", properties).items():
        if not isinstance(value, Mapping):
            return None
        prop = cast("Mapping[str, object]", value)
        if not prop.keys() <= _FLAT_PROPERTY_KEYS:
            return None
        kind = prop.get("type")
        if not isinstance(kind, str) or kind not in _FLAT_TYPES:
            return None
        types[name] = _FLAT_TYPES[kind]
        enum = prop.get("enum")
        if enum is not None or "enum" in prop:
            if not isinstance(enum, list) or kind in ("object", "array"):
                return None  # Python's == is not JSON's for containers ([True] == [1])
            enums[name] = tuple(cast("list[object]", enum))
    return _FlatSchema(types, enums, frozenset(cast("list[str]", required)), closed=not additional)


#: What the meta-schema (draft 2020-12) allows as the value of each annotation keyword.
_ANNOTATION_TYPES: dict[str, type | tuple[type, ...]] = {
    "title": str,
    "description": str,
    "$comment": str,
    "examples": list,
    "deprecated": bool,
    "readOnly": bool,
    "writeOnly": bool,
    "default": object,
}


def _surely_valid(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is a flat object schema (:func:`_flat_schema`) whose every keyword
    has a value the meta-schema allows, so that it is valid without asking jsonschema (whose
    import costs tens of milliseconds of a command's start). Anything else, valid or not, is
    for the meta-schema check; tests compare the two on many schemas."""
    if schema.get("type") != "object" or _flat_schema(schema) is None:
        return False
    required = schema.get("required", [])
    if not all(type(name) is str for name in required) or len(set(required)) != len(required):
        return False
    parts = [
        schema,
        *cast("Mapping[str, Mapping[str, object]]", schema.get("properties", {})).values(),
    ]
    return all(
        isinstance(value, _ANNOTATION_TYPES[key])
        for part in parts
        for key, value in part.items()
        if key in _ANNOTATION_TYPES
    ) and all(type(name) is str for name in schema.get("properties", {}))


#: Verdicts of :func:`schema_problem`, by the schema's ``repr``, oldest first.
_CHECKED: dict[str, str | None] = {}
_CHECKED_MAX = 1024


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (draft 2020-12), or ``None`` when it is.

    The check against the meta-schema costs a millisecond or more, so its verdict is kept for
    the process by the schema's ``repr`` (which tells a tuple from a list, and 1 from 1.0 or
    True): one schema on many tools (every declared subagent's tool has the same one), or one
    output schema on many calls, is checked once."""
    if _surely_valid(schema):
        return None  # a flat schema of well-typed keywords: no need to import jsonschema
    key = repr(schema)
    if key in _CHECKED:
        return _CHECKED[key]
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(dict(schema))
        problem = None
    except jsonschema.SchemaError as exc:
        problem = exc.message
    if len(_CHECKED) >= _CHECKED_MAX:
        del _CHECKED[next(iter(_CHECKED))]
    _CHECKED[key] = problem
    return problem


def kernel_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, a parameters schema the kernel itself writes (its task and subagent tools),
    recorded as valid so that tools built on it skip the meta-schema check; tests check every
    such schema against the meta-schema (tests/specialists/test_kernel_schemas.py)."""
    _CHECKED[repr(schema)] = None
    return schema
