"""A real HTTP server on loopback that answers LLM requests from a script.

It speaks OpenAI chat completions (`POST /v1/chat/completions`) and Anthropic messages
(`POST /v1/messages`), so tests drive the official SDK clients end to end, and it can inject the
failures real providers produce: 429s with Retry-After, 500s, slow answers, dropped
connections and malformed bodies. It records every request and the peak number in flight.

Script format (JSON; see docs/llm.md):

    {
      "sequence": [                       # consumed in order, one entry per request
        {"status": 429, "retry_after": 0},
        {"content": "```python\\nprint(1)\\n```", "usage": {"input_tokens": 12, "output_tokens": 7}}
      ],
      "rules": [                          # then: the first whose regex matches the prompt
        {"match": "softmax", "content": "..."}
      ],
      "default": {"content": "ok"}        # then: this; with none, a 400 naming the problem
    }

An answer holds `content`, or `status` (+ `message`, `retry_after`) for an error, plus optional
`delay_s`, `times` (repeat a sequence entry), `finish_reason`, `usage` (input_tokens,
output_tokens, reasoning_tokens, cached_tokens), `malformed` ("not_json", "missing_fields",
"truncated") or `drop_connection: true`.

Run standalone: python -m kernelwright.llm.testing.scripted_server --script FILE --port N [--log]
(--log: a line per request on stderr; Ctrl-C stops it and says how many requests it received).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping, TextIO

_ANSWER_KEYS = {
    "content", "status", "message", "retry_after", "delay_s", "times", "finish_reason", "usage",
    "malformed", "drop_connection", "match",
}
_MALFORMED_KINDS = {"not_json", "missing_fields", "truncated"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 529: "overloaded_error",
}


@dataclass(frozen=True)
class Answer:
    content: str | None = None
    status: int = 200
    message: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0
    finish_reason: str = "stop"
    usage: Mapping[str, int] | None = None
    malformed: str | None = None
    drop_connection: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Answer":
        unknown = set(data) - _ANSWER_KEYS
        if unknown:
            raise ValueError(f"unknown keys in script answer {dict(data)}: {sorted(unknown)}")
        if data.get("malformed") not in (None, *_MALFORMED_KINDS):
            raise ValueError(f"malformed must be one of {sorted(_MALFORMED_KINDS)}")
        answer = cls(**{k: v for k, v in data.items() if k not in ("times", "match")})
        if answer.status == 200 and answer.content is None and not (
            answer.malformed or answer.drop_connection
        ):
            raise ValueError(f"script answer {dict(data)} needs content, status, malformed or "
                             f"drop_connection")
        return answer


@dataclass
class Script:
    sequence: list[Answer] = field(default_factory=list)
    rules: list[tuple[re.Pattern[str], Answer]] = field(default_factory=list)
    default: Answer | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Script":
        unknown = set(data) - {"sequence", "rules", "default"}
        if unknown:
            raise ValueError(f"unknown script keys {sorted(unknown)}; use sequence, rules, default")
        sequence = [
            Answer.from_dict(entry)
            for entry in data.get("sequence", [])
            for _ in range(int(entry.get("times", 1)))
        ]
        rules = []
        for entry in data.get("rules", []):
            if "match" not in entry:
                raise ValueError(f"rule {entry} needs a 'match' regex")
            rules.append((re.compile(entry["match"], re.S), Answer.from_dict(entry)))
        default = Answer.from_dict(data["default"]) if data.get("default") else None
        return cls(sequence, rules, default)

    @classmethod
    def load(cls, path: Path | str) -> "Script":
        return cls.from_dict(json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class RecordedRequest:
    protocol: str  # "openai" or "anthropic"
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return _prompt_text(self.body)


def _prompt_text(body: Mapping[str, Any]) -> str:
    """All message text of a request, for rule matching (system prompt included)."""
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content blocks
            parts.extend(block.get("text", "") for block in content if isinstance(block, dict))
    return "\n".join(parts)


class ScriptedServer:
    """`with ScriptedServer(script) as server:` then point a client at `server.openai_base_url`
    or `server.anthropic_base_url`. Port 0 picks a free ephemeral port."""

    def __init__(self, script: Script | Mapping[str, Any] | Path | str,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        if isinstance(script, (str, Path)):
            script = Script.load(script)
        elif not isinstance(script, Script):
            script = Script.from_dict(script)
        self.script = script
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._next = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self.log: TextIO | None = None  # a line per request (path, model, the script entry that answers)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"  # the Anthropic SDK appends /v1/messages

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> "ScriptedServer":
        # A short poll interval: stop() waits up to one interval, and tests stop many servers.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True, name="scripted-llm-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Called by the handler threads.

    def _begin(self, request: RecordedRequest) -> Answer | None:
        answer, entry = self._choose(request)
        if self.log is not None:
            status = "no answer left, 400" if answer is None else (
                f"{answer.status}" if answer.status else "malformed" if answer.malformed else "200")
            print(f"#{self.request_count} POST {request.path} model={request.body.get('model', '?')}: "
                  f"{entry} ({status})", file=self.log, flush=True)
        return answer

    def _choose(self, request: RecordedRequest) -> tuple[Answer | None, str]:
        """The answer to `request` and which script entry it is: sequence[i], rules[i], default."""
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self._next < len(self.script.sequence):
                self._next += 1
                return self.script.sequence[self._next - 1], f"sequence[{self._next - 1}]"
        prompt = request.prompt
        for i, (pattern, answer) in enumerate(self.script.rules):
            if pattern.search(prompt):
                return answer, f"rules[{i}] /{pattern.pattern[:40]}/"
        return self.script.default, "default" if self.script.default else "nothing"

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass  # tests would drown in access logs

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": []})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            protocol = ("openai" if self.path.endswith("/chat/completions")
                        else "anthropic" if self.path.endswith("/messages") else None)
            if protocol is None:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "request body is not JSON"}})
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            request = RecordedRequest(protocol, self.path, headers, body)
            answer = server._begin(request)
            ended = False

            def end_once() -> None:
                nonlocal ended
                if not ended:
                    ended = True
                    server._end()

            try:
                self._respond(protocol, request, answer, end_once)
            finally:
                end_once()

        def _respond(self, protocol: str, request: RecordedRequest, answer: Answer | None,
                     before_reply: Any) -> None:
            if answer is None:
                answer = Answer(status=400, message="scripted server: the script has no answer "
                                                    "left for this request")
            if answer.delay_s:
                time.sleep(answer.delay_s)
            # A request stops being in flight before the first byte of its reply: once the client
            # has the reply it may start its next request, which must not overlap this one's count.
            before_reply()
            if answer.drop_connection:
                self.close_connection = True
                self.connection.shutdown(2)  # the client sees the socket closed, no response
                return
            if answer.status != 200:
                self._send_error(protocol, answer)
                return
            payload = (_openai_body if protocol == "openai" else _anthropic_body)(request, answer)
            if answer.malformed == "not_json":
                self._send_raw(200, b"<html>502 Bad Gateway</html>", "application/json")
            elif answer.malformed == "truncated":
                self._send_raw(200, json.dumps(payload).encode()[:40], "application/json")
            elif answer.malformed == "missing_fields":
                self._send_json(200, {"id": payload["id"], "object": "unexpected"})
            else:
                self._send_json(200, payload)

        def _send_error(self, protocol: str, answer: Answer) -> None:
            message = answer.message or f"scripted error {answer.status}"
            if protocol == "openai":
                body: dict[str, Any] = {"error": {"message": message, "type": "scripted",
                                                  "code": str(answer.status)}}
            else:
                error_type = _ANTHROPIC_ERROR_TYPES.get(answer.status, "api_error")
                body = {"type": "error", "error": {"type": error_type, "message": message}}
            headers = {}
            if answer.retry_after is not None:
                headers["Retry-After"] = str(answer.retry_after)
            self._send_json(answer.status, body, headers)

        def _send_json(self, status: int, body: Any, headers: Mapping[str, str] = {}) -> None:
            self._send_raw(status, json.dumps(body).encode(), "application/json", headers)

        def _send_raw(self, status: int, data: bytes, content_type: str,
                      headers: Mapping[str, str] = {}) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _usage(request: RecordedRequest, answer: Answer) -> dict[str, int]:
    """Scripted usage, or a rough stand-in (4 characters a token) when the script gives none."""
    usage = dict(answer.usage or {})
    usage.setdefault("input_tokens", max(1, len(request.prompt) // 4))
    usage.setdefault("output_tokens", max(1, len(answer.content or "") // 4))
    return usage


def _openai_body(request: RecordedRequest, answer: Answer) -> dict[str, Any]:
    usage = _usage(request, answer)
    body: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.body.get("model", "scripted"),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.content},
            "finish_reason": answer.finish_reason,
        }],
        "usage": {
            "prompt_tokens": usage["input_tokens"],
            "completion_tokens": usage["output_tokens"],
            "total_tokens": usage["input_tokens"] + usage["output_tokens"],
        },
    }
    if "reasoning_tokens" in usage:
        body["usage"]["completion_tokens_details"] = {"reasoning_tokens": usage["reasoning_tokens"]}
    if "cached_tokens" in usage:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": usage["cached_tokens"]}
    return body


def _anthropic_body(request: RecordedRequest, answer: Answer) -> dict[str, Any]:
    usage = _usage(request, answer)
    cached = usage.get("cached_tokens", 0)
    stop_reason = {"stop": "end_turn", "length": "max_tokens"}.get(answer.finish_reason,
                                                                   answer.finish_reason)
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "scripted"),
        "content": [{"type": "text", "text": answer.content}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        # Anthropic reports cache reads apart from (not inside) input_tokens.
        "usage": {"input_tokens": usage["input_tokens"] - cached, "output_tokens": usage["output_tokens"],
                  "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, type=Path, help="script file (JSON)")
    parser.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log", action="store_true",
                        help="a line per request on stderr: path, model, the script entry that answered")
    args = parser.parse_args(argv)
    server = ScriptedServer(args.script, host=args.host, port=args.port)
    server.log = sys.stderr if args.log else None
    print(f"OpenAI protocol:    {server.openai_base_url}", flush=True)
    print(f"Anthropic protocol: {server.anthropic_base_url}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
        print(f"scripted server stopped: {server.request_count} request"
              f"{'' if server.request_count == 1 else 's'} received", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
