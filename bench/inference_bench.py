"""What prefix reuse and per-session KV states are worth with the local model, in figures.

With one model (the bundled SmolLM2-135M unless --model names another) it prints:

    prompt processing   tokens/s evaluating a --tokens prompt from an empty context, and generation tokens/s
    prefix reuse        time to first token for that prompt cold, extended by one turn with the prefix
                        cached, and again after another session used the context (its state restored)
    KV state            bytes per token of context and fixed overhead, from snapshots at two lengths
    save / load         milliseconds to copy a --tokens state out of llama.cpp and back, agentd's way and
                        through Llama.save_state() / load_state()

These size the KV LRU: a state costs its bytes for as long as it is kept, and restoring it costs the
load time instead of re-evaluating the prompt. Figures only, no assertions.

    python bench/inference_bench.py
    python bench/inference_bench.py --tokens 2000 --repeats 3 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.inference import LocalModel, Message  # noqa: E402
from runtime.kv_cache import capture, restore  # noqa: E402
from runtime.model_file import resolve_model  # noqa: E402


def long_conversation(model: LocalModel, tokens: int) -> list[Message]:
    """A system prompt of numbered rules, grown until the rendered prompt holds at least `tokens` tokens."""
    rules: list[str] = []
    while True:
        rules.extend(
            f"Rule {i}: when a request about topic {i} arrives, check the account, log it and answer briefly."
            for i in range(len(rules), len(rules) + 20)
        )
        messages = [Message("system", "\n".join(rules)), Message("user", "Which rule covers topic 7?")]
        if model.count(model.render(messages)) >= tokens:
            return messages


def extended(messages: list[Message], answer: str, question: str) -> list[Message]:
    return [*messages, Message("assistant", answer), Message("user", question)]


def timed_ms(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF model file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--tokens", type=int, default=4000, help="length of the long prompt (default 4000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each save/load timing (median shown)")
    parser.add_argument("--threads", type=int, help="generation threads (default: llama-cpp-python's choice)")
    args = parser.parse_args()

    model = LocalModel(resolve_model(args.model), n_threads=args.threads)
    llama = model._llama
    print(f"model {model.name}, context {model.n_ctx} tokens, threads {llama.context_params.n_threads}")

    messages = long_conversation(model, args.tokens)
    prompt = model.render(messages)
    cold = model.complete(prompt, schema=None, max_tokens=16, session="long")
    n = cold.stats.prompt_tokens
    print("\nprompt processing")
    print(f"  cold {n}-token prompt: {cold.stats.ttft_s:.2f} s to first token, {n / cold.stats.ttft_s:.0f} tokens/s")

    generated = model.complete(prompt, schema=None, max_tokens=64, session="long")
    rate = generated.stats.completion_tokens / generated.stats.generation_s
    print(f"  generation: {generated.stats.completion_tokens} tokens at {rate:.1f} tokens/s")

    turn = extended(messages, cold.text, "And topic 9?")
    cached = model.complete(model.render(turn), schema=None, max_tokens=16, session="long")
    print("\nprefix reuse")
    print(f"  {n} tokens cold:                  {cold.stats.ttft_s * 1000:8.0f} ms to first token")
    print(
        f"  + one turn, prefix cached:        {cached.stats.ttft_s * 1000:8.0f} ms "
        f"({cached.stats.cached_tokens} cached, {cached.stats.evaluated_tokens} evaluated)"
    )
    model.complete(model.render([Message("user", "Hello")]), schema=None, max_tokens=8, session="other")
    after_switch = model.render(extended(turn, cached.text, "And topic 11?"))
    restored = model.complete(after_switch, schema=None, max_tokens=16, session="long")
    print(
        f"  + one turn after another session: {restored.stats.ttft_s * 1000:8.0f} ms "
        f"({restored.stats.cached_tokens} cached, {restored.stats.evaluated_tokens} evaluated; "
        "includes saving the other session and restoring this one)"
    )

    long_state = capture(llama)
    llama.reset()
    llama.eval(model.tokenize(model.render([Message("user", "Hello")])))
    short_state = capture(llama)
    per_token = (long_state.nbytes - short_state.nbytes) / (long_state.n_tokens - short_state.n_tokens)
    overhead = short_state.nbytes - per_token * short_state.n_tokens
    print("\nKV state")
    print(f"  {long_state.n_tokens} tokens: {long_state.nbytes / 2**20:.1f} MiB; {short_state.n_tokens} tokens: "
          f"{short_state.nbytes / 2**10:.0f} KiB")
    print(f"  {per_token:,.0f} bytes per token + {overhead / 2**10:,.1f} KiB fixed")
    print(f"  512 MiB LRU holds about {512 * 2**20 / (per_token * n):.1f} states of {n} tokens")

    restore(llama, long_state)
    save_ms = timed_ms(lambda: capture(llama), args.repeats)
    load_ms = timed_ms(lambda: restore(llama, long_state), args.repeats)
    llama_state = llama.save_state()
    llama_save_ms = timed_ms(llama.save_state, args.repeats)
    llama_load_ms = timed_ms(lambda: llama.load_state(llama_state), args.repeats)
    llama_bytes = llama_state.llama_state_size + llama_state.scores.nbytes + llama_state.input_ids.nbytes
    print(f"\nsave / load of the {long_state.n_tokens}-token state (median of {args.repeats})")
    print(f"  agentd capture/restore:        save {save_ms:6.1f} ms  load {load_ms:6.1f} ms  "
          f"({long_state.nbytes / 2**20:.1f} MiB)")
    print(f"  Llama.save_state/load_state:   save {llama_save_ms:6.1f} ms  load {llama_load_ms:6.1f} ms  "
          f"({llama_bytes / 2**20:.1f} MiB, with the logits buffer)")
    model.close()


if __name__ == "__main__":
    main()
