"""A fake model provider that speaks the OpenAI chat-completions protocol over real HTTP, so
LiteLLM's own HTTP path runs in tests and benchmarks.

Point Quorum at it with ``QUORUM_API_BASE=<url>/v1`` (any ``OPENAI_API_KEY``) and models named
``openai/fake-<role>`` (``openai/fake-planner``, …): the part after ``fake-`` is the role the
script sees. Replies come from ``script(role, schema_name, messages)``; the default answers
like the offline model, so every pattern runs end to end.

Faults are injected by rate, from a seeded random generator so a run can be repeated:

=============  ========================================================================
``429``        429 with a ``Retry-After`` header
``500``        500 with an error body
``reset``      the connection is reset (RST) before any response
``timeout``    the response never comes (the connection is held, then dropped)
``malformed``  200 whose body is not JSON
``truncated``  the body stops early: a stream without its end, or fewer bytes than promised
=============  ========================================================================

In a test: ``with FakeProvider(latency=0.05, faults={"500": 0.3}) as fake: …``. As a process
(for a stack in other processes): ``python tests/fakeprovider.py --port 0 --latency 0.5``
prints its URL; ``POST /_fake/config`` changes latency and faults, ``GET /_fake/log`` returns
the requests it has seen (time received, role, fault).
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAULTS = ("429", "500", "reset", "timeout", "malformed", "truncated")
SCHEMA_PREFIX = "Reply with a single JSON object"
Script = Callable[[str, "str | None", list], str]


def schema_name(body: dict) -> str | None:
    """The structured-output schema a request asks for: the native response format's name, or
    the title of the schema Quorum appends to the prompt for other models."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("name")
    messages = body.get("messages") or []
    last = messages[-1].get("content") if messages else ""
    if isinstance(last, str) and last.startswith(SCHEMA_PREFIX):
        try:
            return json.loads(last[last.index("{"):]).get("title")
        except ValueError:
            return None
    return None


def offline_script(role: str, schema: str | None, messages: list) -> str:
    from agents_app.llm import offline
    from agents_app.patterns import PATTERNS

    if not offline.HANDLERS.get("PlanDoc"):  # outside Django, the app has not registered them
        len(PATTERNS)  # loading the registry teaches the offline model each pattern's replies
    return offline.reply(role, schema, messages)


@dataclass
class Seen:
    """One request as the fake saw it."""
    at: float  # time.time() when the request had been read
    role: str
    model: str
    schema: str | None
    stream: bool
    fault: str  # "" for a normal reply


class FakeProvider:
    def __init__(self, *, latency: float = 0.0, faults: dict[str, float] | None = None,
                 script: Script | None = None, seed: int = 1, port: int = 0,
                 retry_after: float = 0.05, hang: float = 30.0,
                 usage: tuple[int, int] = (120, 40)) -> None:
        self.latency = latency
        self.faults = dict(faults or {})
        self.script = script or offline_script
        self.retry_after = retry_after
        self.hang = hang
        self.usage = usage
        self.seen: list[Seen] = []
        self.upcoming: list[str] = []  # faults for the next requests, in order, before the rates
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeProvider:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="fake-provider")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases held "timeout" connections
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- behaviour -------------------------------------------------------------------------
    def configure(self, *, latency: float | None = None, faults: dict | None = None,
                  seed: int | None = None) -> None:
        with self._lock:
            if latency is not None:
                self.latency = float(latency)
            if faults is not None:
                unknown = set(faults) - set(FAULTS)
                if unknown:
                    raise ValueError(f"unknown faults: {sorted(unknown)}")
                self.faults = {k: float(v) for k, v in faults.items()}
            if seed is not None:
                self._rng = random.Random(seed)

    def pick_fault(self) -> str:
        with self._lock:
            if self.upcoming:
                return self.upcoming.pop(0)
            roll = self._rng.random()
        for name in FAULTS:
            rate = self.faults.get(name, 0.0)
            if roll < rate:
                return name
            roll -= rate
        return ""

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def counts(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for s in self.seen:
                out[s.fault or "ok"] = out.get(s.fault or "ok", 0) + 1
            return out


def _handler_for(fake: FakeProvider):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, as real servers do

        def log_message(self, *args) -> None:  # quiet: the log is fake.seen
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/_fake/log":
                with fake._lock:
                    rows = [asdict(s) for s in fake.seen]
                return self._json(200, {"seen": rows})
            if self.path.rstrip("/").endswith("/models"):
                return self._json(200, {"object": "list", "data": []})
            self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._json(400, {"error": {"message": "request body is not JSON"}})
            if self.path.rstrip("/") == "/_fake/config":
                try:
                    fake.configure(latency=body.get("latency"), faults=body.get("faults"),
                                   seed=body.get("seed"))
                except (TypeError, ValueError) as exc:
                    return self._json(400, {"error": {"message": str(exc)}})
                return self._json(200, {"latency": fake.latency, "faults": fake.faults})
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._json(404, {"error": {"message": "not found"}})
            self._complete(body)

        # --- one chat completion ---------------------------------------------------------
        def _complete(self, body: dict) -> None:
            model = str(body.get("model", ""))
            role = model.split("fake-", 1)[1] if "fake-" in model else ""
            stream = bool(body.get("stream"))
            schema = schema_name(body)
            fault = fake.pick_fault()
            fake.record(Seen(time.time(), role, model, schema, stream, fault))
            if fake.latency:
                time.sleep(fake.latency)
            if fault == "reset":
                return self._reset()
            if fault == "timeout":
                fake._stop.wait(fake.hang)
                return self._reset()
            if fault == "429":
                return self._json(429, {"error": {"message": "Rate limit reached (fake).",
                                                  "type": "rate_limit_error"}},
                                  {"Retry-After": f"{fake.retry_after:g}"})
            if fault == "500":
                return self._json(500, {"error": {"message": "The server had an error (fake).",
                                                  "type": "server_error"}})
            if fault == "malformed":
                return self._raw(200, b'{"id": "chatcmpl-fake", "choices": [{"mess',
                                 "application/json")
            text = fake.script(role, schema, body.get("messages") or [])
            if stream:
                return self._stream(model, text, truncated=fault == "truncated")
            payload = json.dumps(_completion(model, text, fake.usage)).encode()
            if fault == "truncated":
                return self._raw(200, payload[: len(payload) // 2], "application/json",
                                 length=len(payload))
            self._raw(200, payload, "application/json")

        def _stream(self, model: str, text: str, *, truncated: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            pieces = [text[i:i + 40] for i in range(0, len(text), 40)] or [""]
            if truncated:
                pieces = pieces[: max(1, len(pieces) // 2)]
            for i, piece in enumerate(pieces):
                chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                         "created": int(time.time()), "model": model, "choices": [{
                             "index": 0, "finish_reason": None,
                             "delta": {"role": "assistant", "content": piece} if i == 0
                             else {"content": piece}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            if truncated:
                return self._reset()
            end = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                   "created": int(time.time()), "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

        # --- plumbing --------------------------------------------------------------------
        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            self._raw(status, json.dumps(payload).encode(), "application/json", headers=headers)

        def _raw(self, status: int, data: bytes, content_type: str, *, length: int | None = None,
                 headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data) if length is None else length))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            if length is not None:  # promised more than was sent: hang up
                self._reset()

        def _reset(self) -> None:
            """Drop the connection with a TCP reset, not a clean close."""
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.close_connection = True
            try:
                self.connection.close()
            except OSError:
                pass

    return Handler


def _completion(model: str, text: str, usage: tuple[int, int]) -> dict:
    prompt, completion = usage
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


def fake_models(*roles: str) -> dict[str, str]:
    """Model names for ``roles`` that route to the fake provider."""
    return {role: f"openai/fake-{role}" for role in roles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0,
                        help="total fault rate, spread evenly over all fault kinds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    faults = {name: args.fault_rate / len(FAULTS) for name in FAULTS} if args.fault_rate else {}
    fake = FakeProvider(latency=args.latency, faults=faults, seed=args.seed, port=args.port)
    print(fake.url, flush=True)
    try:
        fake.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
