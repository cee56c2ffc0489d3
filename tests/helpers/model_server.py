"""A scripted OpenAI-compatible completions endpoint, for tests of the harness around the model.

It tokenizes with the smoke model's real vocabulary, so agentd's prompts, counts and manifests are
real; only the reply text is scripted. Tests that are about the daemon, the queue or crash recovery
use it (through `model_url`) to control what the model says and how long it takes, since `agentd serve`
runs in a process of its own; a test that builds its runtime in-process scripts the replies with
`runtime.inference.scripted.ScriptedModel` instead, and tests about the model path use the model itself.

Run as a program: python -m tests.helpers.model_server PORT SCRIPT.json
SCRIPT.json: {"delay_s": 0.3, "replies": [...]} where each reply is a JSON object or a string; the
token "{n}" in a string reply is replaced by a counter that increases with every reply. With "slots": N
it answers GET /props as llama-server does (N slots, n_ctx 8192); with "requests": PATH it appends each
completion request's fields but the prompt to PATH, a JSON object per line. With "cut": true a reply's
stream ends with [DONE] and no finish reason, as a server that interrupts a request ends it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from llama_cpp import Llama

from runtime.inference.model_file import smoke_model_path


class Script:
    def __init__(self, path: Path) -> None:
        spec = json.loads(path.read_text())
        self.delay_s = float(spec.get("delay_s", 0.2))
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in spec["replies"]]
        self.slots = int(spec.get("slots", 0))
        self.requests = Path(spec["requests"]) if spec.get("requests") else None
        self.cut = bool(spec.get("cut", False))
        self.count = 0
        self.lock = threading.Lock()

    def next(self) -> str:
        with self.lock:
            reply = self.replies[self.count % len(self.replies)].replace("{n}", str(self.count))
            self.count += 1
            return reply


def serve(port: int, script: Script) -> None:
    vocab = Llama(model_path=str(smoke_model_path()), vocab_only=True, verbose=False)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _json(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/props" and script.slots:
                self._json(200, {"total_slots": script.slots, "default_generation_settings": {"n_ctx": 8192}})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/extras/tokenize":
                tokens = vocab.tokenize(body.get("input", "").encode(), add_bos=False, special=True)
                self._json(200, {"tokens": tokens})
            elif self.path == "/v1/completions":
                if script.requests is not None:
                    with script.lock, script.requests.open("a") as f:
                        f.write(json.dumps({k: v for k, v in body.items() if k != "prompt"}) + "\n")
                time.sleep(script.delay_s)
                reply = script.next()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                chunk = {"choices": [{"text": reply, "finish_reason": None}]}
                done = {"choices": [{"text": "", "finish_reason": "stop"}]}
                for event in (chunk,) if script.cut else (chunk, done):
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
            else:
                self._json(404, {"error": "not found"})

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), Script(Path(sys.argv[2])))
