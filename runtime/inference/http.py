"""A model behind an OpenAI-compatible HTTP server, in place of the in-process one."""

from __future__ import annotations

import functools
import http.client
import json
import socket
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import anyio

from runtime.config import MODEL_CONNECT_TIMEOUT_S, MODEL_READ_TIMEOUT_S
from runtime.errors import InferenceError
from runtime.inference.grammar import schema_grammar
from runtime.inference.model import (
    SEED,
    CallStats,
    Completion,
    Message,
    ProgressFn,
    Serialized,
    abandonment,
    check_fits,
    throttled,
)
from runtime.inference.template import ChatTemplate, template_of_file


class EndpointError(InferenceError):
    """An HTTP model endpoint failed; `status` is its HTTP status code when it answered at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _NoConnection(TimeoutError):
    """The server did not take the connection within the connect timeout."""


class _Timed:
    """An HTTP connection with two timeouts: urlopen's `timeout` for connecting, then `read_timeout_s`
    for every wait on the server. A call its caller abandons has its socket shut down, which ends a
    read that is waiting for the server at once."""

    sock: socket.socket

    def __init__(self, *args: Any, read_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout_s = read_timeout_s

    def connect(self) -> None:
        try:
            super().connect()  # type: ignore[misc]
        except TimeoutError as e:
            raise _NoConnection(str(e)) from None
        self.sock.settimeout(self.read_timeout_s)
        abandon = abandonment()
        if abandon is not None:
            sock = self.sock
            abandon.on_set(lambda: sock.shutdown(socket.SHUT_RDWR))


class _TimedHTTP(_Timed, http.client.HTTPConnection):
    pass


class _TimedHTTPS(_Timed, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, read_timeout_s: float) -> None:
        super().__init__()
        self._read_timeout_s = read_timeout_s

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_TimedHTTP, read_timeout_s=self._read_timeout_s), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, read_timeout_s: float) -> None:
        super().__init__()
        self._read_timeout_s = read_timeout_s

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_TimedHTTPS, read_timeout_s=self._read_timeout_s)
        return self.do_open(connection, req, context=self._context)


def slot_of(session: str, slots: int) -> int:
    """The server slot a session's calls go to: the same in every worker and every process (a stable
    hash, not Python's salted one), so a task resumed elsewhere finds its prefix where it left it."""
    return zlib.crc32(session.encode()) % slots


class HttpModel(Serialized):
    """A model behind an OpenAI-compatible HTTP server, in place of the in-process one.

    agentd still renders the prompt itself and sends the text to `/v1/completions`, so the prompt it
    records is the prompt the server evaluated; the schema goes as a GBNF `grammar`, which both
    llama-cpp-python's server and llama.cpp's `llama-server` accept there. Tokens are counted by the
    server (`/extras/tokenize` on llama-cpp-python, `/tokenize` on llama-server).

    The chat template comes from `template_from` (a local copy of the served GGUF; only its vocabulary
    is read) or else from llama-server's `GET /props`; llama-cpp-python's server does not expose it.
    The context length comes from `n_ctx` or else from `/props`.

    Prefix reuse: llama-server keeps one KV cache per slot (`total_slots` in `/props`), and a request
    names its slot with `id_slot`; each task (the call's session) is sent to the same slot every time,
    so its prefix is there at its next decision unless another task hashed to the slot meanwhile.
    llama-cpp-python's server has one context and, started with `--cache true` (`agentd model
    serve` does), saves each prompt's state in RAM and restores the longest matching prefix.
    `cache_prompt` asks both to reuse what they hold.
    """

    stops_at_once = True  # an abandoned call's socket is shut down

    def __init__(
        self,
        base_url: str,
        *,
        template_from: Path | None = None,
        n_ctx: int | None = None,
        model: str | None = None,
        api_key: str | None = None,
        connect_timeout_s: float = MODEL_CONNECT_TIMEOUT_S,
        read_timeout_s: float = MODEL_READ_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self._api_key = api_key
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._opener = urllib.request.build_opener(_HTTPHandler(read_timeout_s), _HTTPSHandler(read_timeout_s))
        self._limiter = anyio.CapacityLimiter(1)
        self._tokenize_route: str | None = None
        props = self._props()
        self.n_ctx = n_ctx or props.get("default_generation_settings", {}).get("n_ctx") or 0
        if not self.n_ctx:
            raise InferenceError(f"{self.base_url} does not say its context length (no /props): pass n_ctx")
        self.template = self._template(template_from, props)
        self.slots = int(props.get("total_slots") or 0)
        served = model or Path(props.get("model_path") or "").name or (template_from.name if template_from else "")
        self.name = served or self.base_url

    def render(self, messages: Sequence[Message]) -> str:
        return self.template.render(messages)

    def tokenize(self, text: str) -> list[int]:
        if self._tokenize_route is None:
            self._tokenize_route = self._find_tokenize_route()
        if self._tokenize_route == "/extras/tokenize":
            # llama-cpp-python tokenizes with add_bos=True, which llama.cpp honours only if the model asks
            # for a BOS: the same tokens its /v1/completions evaluates.
            return self._post("/extras/tokenize", {"input": text})["tokens"]
        return self._post("/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]

    def count(self, text: str) -> int:
        return len(self.tokenize(text))

    def complete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
        repeat_penalty: float = 1.0,
    ) -> Completion:
        prompt_tokens = self.count(prompt)
        check_fits(prompt_tokens, max_tokens, self.n_ctx, self.name)
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            # Both servers default to 1.1, which would change greedy answers: 1.0 unless the caller asks.
            "repeat_penalty": repeat_penalty,
            "seed": SEED,
            "stream": True,
            "cache_prompt": True,
        }
        if session is not None and self.slots > 1:
            body["id_slot"] = slot_of(session, self.slots)
        if schema is not None:
            body["grammar"] = schema_grammar(schema)
        if self._model:
            body["model"] = self._model
        report = throttled(progress)
        started = time.perf_counter()
        if report is not None:
            # The server does not stream its prompt evaluation: one report that it has the whole prompt.
            report("evaluating", 0, prompt_tokens)
        first_at: float | None = None
        parts: list[str] = []
        chunks = 0
        finish_reason: str | None = None
        usage: dict = {}
        timings: dict = {}
        for event in self._stream("/v1/completions", body):
            choice = (event.get("choices") or [{}])[0]
            if choice.get("text"):
                if first_at is None:
                    first_at = time.perf_counter()
                parts.append(choice["text"])
                chunks += 1
                if report is not None:
                    report("generating", chunks, max_tokens)
            finish_reason = choice.get("finish_reason") or finish_reason
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
        ended = time.perf_counter()
        if finish_reason is None:
            # Both servers end a reply with a finish reason; a stream closed without one was cut short, and
            # its text is not the model's whole answer. Seen from llama-cpp-python's server run with its
            # default interrupt_requests, which ends one request's stream when another arrives.
            raise EndpointError(
                f"{self.base_url}/v1/completions ended its answer without a finish reason after {chunks} "
                "chunks: cut short (a server that interrupts a request when another arrives?)"
            )
        if report is not None:
            report("generating", chunks, max_tokens, last=True)
        first_at = first_at or ended
        cached = timings.get("cache_n")
        stats = CallStats(
            prompt_tokens=usage.get("prompt_tokens", prompt_tokens),
            cached_tokens=cached,
            evaluated_tokens=timings.get("prompt_n"),
            # llama-cpp-python streams one chunk per token and reports no usage when streaming.
            completion_tokens=usage.get("completion_tokens") or timings.get("predicted_n") or chunks,
            ttft_s=first_at - started,
            generation_s=ended - first_at,
        )
        return Completion(text="".join(parts), stats=stats, finish_reason=finish_reason)

    def stats(self) -> dict[str, Any]:
        return {"model": self.name, "base_url": self.base_url, "n_ctx": self.n_ctx, "template": self.template.origin}

    def _template(self, template_from: Path | None, props: dict) -> ChatTemplate:
        if template_from is not None:
            return template_of_file(Path(template_from))
        if props.get("chat_template"):
            return ChatTemplate(
                props["chat_template"],
                bos_token=props.get("bos_token", ""),
                eos_token=props.get("eos_token", ""),
                origin=f"{self.base_url}/props",
            )
        raise InferenceError(
            f"{self.base_url} does not expose its chat template: pass template_from (the served GGUF file)"
        )

    def _props(self) -> dict:
        try:
            return self._request("GET", "/props")
        except EndpointError as e:
            if e.status in (404, 405):
                return {}
            raise

    def _find_tokenize_route(self) -> str:
        try:
            self._post("/extras/tokenize", {"input": ""})
            return "/extras/tokenize"
        except EndpointError as e:
            if e.status in (404, 405):
                return "/tokenize"
            raise

    def _post(self, route: str, body: dict) -> dict:
        return self._request("POST", route, body)

    def _request(self, method: str, route: str, body: dict | None = None) -> dict:
        with self._open(method, route, body) as response:
            try:
                return json.loads(response.read())
            except (OSError, ValueError) as e:
                self._failed(route, e, "sent no readable answer")

    def _stream(self, route: str, body: dict) -> Iterator[dict]:
        """The JSON events of a server-sent event stream, until `[DONE]` or the end of the body."""
        with self._open("POST", route, body) as response:
            try:
                for raw in response:
                    line = raw.decode("utf-8").strip()
                    if not line.startswith("data:"):
                        continue  # blank separators, comments and pings
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        return
                    event = json.loads(data)
                    if "error" in event:
                        raise EndpointError(f"{self.base_url}{route} failed: {event['error']}")
                    yield event
            except (OSError, ValueError) as e:
                self._failed(route, e, "broke off its answer")
            # The end of the body ends a stream, and so does the shutdown of an abandoned call's socket.
            _check_abandoned()

    def _open(self, method: str, route: str, body: dict | None):
        url = self.base_url + route
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            return self._opener.open(request, timeout=self._connect_timeout_s)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", errors="replace")[:300]
            raise EndpointError(f"{url} answered {e.code}: {detail}", status=e.code) from None
        except (urllib.error.URLError, OSError) as e:
            self._failed(route, e, "did not respond")

    def _failed(self, route: str, error: Exception, what: str) -> NoReturn:
        """Raise the reason a request to `route` failed: abandoned, a timeout with its setting, or `what`."""
        _check_abandoned()
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        url = self.base_url + route
        if isinstance(reason, _NoConnection):
            raise EndpointError(
                f"{url} did not take a connection within {self._connect_timeout_s:g} s (model_connect_timeout_s)"
            ) from None
        if isinstance(reason, TimeoutError):
            raise EndpointError(
                f"{url} sent nothing for {self._read_timeout_s:g} s (model_read_timeout_s)"
            ) from None
        raise EndpointError(f"{url} {what}: {reason}") from None


def _check_abandoned() -> None:
    abandon = abandonment()
    if abandon is not None:
        abandon.check()
