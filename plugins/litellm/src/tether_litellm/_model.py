"""The LiteLLM model: tether requests through ``litellm.acompletion`` (OpenAI's shape, which
LiteLLM translates to each provider's API), and back."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse

from ._defaults import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT
from ._errors import error_from
from ._sdk import litellm, validate_environment
from ._stream import StreamAssembler
from ._wire import NotAChatCompletion, encode_messages, encode_tools, parse_completion

__all__ = ("LiteLLMModel",)


class LiteLLMModel:
    """A model LiteLLM reaches: ``model`` is LiteLLM's name (``PROVIDER/MODEL``, e.g.
    ``bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0``, ``azure/my-deployment``).

    ``api_base``, ``api_key`` and ``api_version`` are passed to LiteLLM when set; where they
    are not, LiteLLM reads the provider's own variables (``AWS_*``, ``AZURE_API_*``, ...).
    ``params`` are more keyword arguments of ``litellm.acompletion`` (``aws_region_name``,
    ``vertex_project``, ``reasoning_effort``, ``drop_params``...). ``max_tokens`` caps every
    answer (the turn's remaining output budget lowers it; ``None`` sends none). LiteLLM's own
    retries are off: the turn loop retries, honouring the wait the provider asked for.
    ``images`` says whether the model takes images; ``None`` asks LiteLLM's model map.
    """

    def __init__(
        self,
        name: str,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        api_version: str | None = None,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        timeout: float = DEFAULT_TIMEOUT,
        images: bool | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.api_base = api_base.rstrip("/") if api_base else None
        self.api_version = api_version
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.params: dict[str, Any] = dict(params or {})
        self._api_key = api_key
        self.provider = _provider(model, self.api_base)
        """The provider LiteLLM routes ``model`` to (``bedrock``, ``azure``, ...)."""
        self.where = self.api_base or self.provider
        """What errors name: the API base, else the provider."""
        info = _model_info(model)
        self.context_window: int | None = _positive(info.get("max_input_tokens"))
        """The window LiteLLM's model map gives (``None``: not in it; tether's table then)."""
        self.max_output_tokens: int | None = _positive(info.get("max_output_tokens"))
        self.accepts_images = bool(info.get("supports_vision")) if images is None else images
        """Whether requests carry the images of tool results (as ``image_url`` parts)."""

    async def aclose(self) -> None:
        """Nothing of its own to close: LiteLLM keeps its clients for the process."""

    def arguments(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``litellm.acompletion`` for ``request``."""
        arguments: dict[str, Any] = {**self.params, "model": self.model}
        arguments["messages"] = encode_messages(request)
        if request.tools:
            arguments["tools"] = encode_tools(request)
        limits = [n for n in (self.max_tokens, request.max_output_tokens) if n is not None]
        if limits:
            arguments["max_tokens"] = min(limits)
        if self.api_base is not None:
            arguments["api_base"] = self.api_base
        if self._api_key is not None:
            arguments["api_key"] = self._api_key
        if self.api_version is not None:
            arguments["api_version"] = self.api_version
        arguments["timeout"] = self.timeout
        # The turn loop retries (with the provider's retry-after); LiteLLM's retries and the
        # OpenAI client's under it would multiply its attempts and hide the waits.
        arguments["num_retries"] = 0
        arguments["max_retries"] = 0
        return arguments

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one step; every failure is a :class:`ModelError` (recoverable ones carry the
        wait the provider asked for)."""
        try:
            answer = await litellm.acompletion(**self.arguments(request))
            data = cast("Any", answer).model_dump()
        except Exception as exc:  # LiteLLM raises many kinds: each is mapped
            raise error_from(self.name, self.where, exc) from exc
        return self._parse(data)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Answer one step streamed (usage in the last chunk): text, reasoning and tool-call
        argument pieces as they arrive, then the answer, the same ``ModelResponse``
        :meth:`request` gives. A stream cut before its end is a recoverable
        ``MODEL_REQUEST_FAILED`` (the step is sent again)."""
        arguments = self.arguments(request)
        arguments["stream"] = True
        arguments["stream_options"] = {"include_usage": True}
        assembler = StreamAssembler()
        try:
            chunks = cast("Any", await litellm.acompletion(**arguments))
            try:
                async for chunk in chunks:
                    for delta in assembler.feed(chunk.model_dump()):
                        yield delta
            finally:
                await chunks.aclose()
        except ModelError:
            raise
        except Exception as exc:
            raise error_from(self.name, self.where, exc) from exc
        if not assembler.finished:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.where} ended before the answer did",
                recoverable=True,
                remedy="the step is sent again; if it keeps failing, check the provider",
            )
        yield self._parse(assembler.completion())

    def _parse(self, data: object) -> ModelResponse:
        try:
            return parse_completion(data)
        except NotAChatCompletion as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the answer from {self.where} is not a chat completion: {exc}",
                remedy="check the model name and the API base",
            ) from exc

    async def probe(self) -> str:
        """What ``tether check --model`` says: the provider LiteLLM routes to, and whether the
        variables it documents for it are set. Nothing is sent (no provider has a free request
        LiteLLM can make for every one); raises ``MODEL_CONFIG_MISSING`` naming the variables
        missing when no key was given."""
        found = validate_environment(model=self.model, api_base=self.api_base)
        listed: object = found.get("missing_keys")
        missing = [
            name for name in map(str, cast("list[object]", listed or [])) if not self._given(name)
        ]
        if missing:
            raise ModelError(
                ErrorCode.MODEL_CONFIG_MISSING,
                f"{self.name}: LiteLLM's {self.provider} route needs "
                f"{', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not set",
                remedy="export them (LiteLLM's provider docs say what each holds), or set "
                "[plugin.litellm] api_base / api_key_env",
            )
        window = f"{self.context_window:,} tokens" if self.context_window else "not in its map"
        return (
            f"model {self.name}: LiteLLM routes it to {self.provider} at {self.where}, "
            f"credentials found; context window {window} (not contacted: LiteLLM has no free "
            "request for every provider)"
        )

    def _given(self, variable: str) -> bool:
        """Whether what LiteLLM's ``variable`` holds is given otherwise: by the model's own
        arguments, by ``params`` (``vertex_project`` for ``VERTEXAI_PROJECT``, ...), or, for
        AWS's keys, by another way AWS finds credentials (a profile, a role)."""
        if variable.endswith("_API_KEY") and self._api_key is not None:
            return True
        if variable.endswith(("_API_BASE", "_BASE_URL")) and self.api_base is not None:
            return True
        if variable.endswith("_API_VERSION") and self.api_version is not None:
            return True
        if PARAM_OF.get(variable) in self.params:
            return True
        if variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            return (
                any(name in self.params for name in ("aws_profile_name", "aws_role_name"))
                or any(os.environ.get(name) for name in AWS_OTHER_CREDENTIALS)
                or (Path.home() / ".aws" / "credentials").is_file()
            )
        return False


#: LiteLLM's variables -> the ``litellm.acompletion`` argument that gives the same.
PARAM_OF = {
    "VERTEXAI_PROJECT": "vertex_project",
    "VERTEXAI_LOCATION": "vertex_location",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_REGION_NAME": "aws_region_name",
}
#: Variables through which AWS finds credentials without access keys in the environment.
AWS_OTHER_CREDENTIALS = (
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


def _provider(model: str, api_base: str | None) -> str:
    try:
        found = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception as exc:  # LiteLLM's BadRequestError: it knows no such provider
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"LiteLLM does not know the provider of '{model}': {' '.join(str(exc).split())[:300]}",
            remedy="write LiteLLM's PROVIDER/MODEL, e.g. litellm:bedrock/MODEL_ID, "
            "litellm:azure/DEPLOYMENT, litellm:vertex_ai/MODEL",
        ) from exc
    return str(found[1])


def _model_info(model: str) -> dict[str, object]:
    try:
        return dict(litellm.get_model_info(model=model))
    except Exception:  # not in LiteLLM's map: nothing known
        return {}


def _positive(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
