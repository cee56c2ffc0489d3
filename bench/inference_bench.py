"""What prefix reuse, per-session KV states and OpenMP's wait policy are worth with the local model, in figures.

With one model (the default qwen2.5-coder-0.5b unless --model names another: a known name or a GGUF path)
it prints:

    prompt processing   tokens/s evaluating a --tokens prompt from an empty context, and generation tokens/s
    prefix reuse        time to first token for that prompt cold, extended by one turn with the prefix
                        cached, and again after another session used the context (its state restored)
    KV state            bytes per token of context and fixed overhead, from snapshots at two lengths
    save / load         milliseconds to copy a --tokens state out of llama.cpp and back, agentd's way and
                        through Llama.save_state() / load_state()
    wait policy         generation tokens/s with the machine idle and with one other core kept busy (a
                        busy-loop process for the duration), each with OMP_WAIT_POLICY=PASSIVE (what
                        agentd sets) and with the variable unset (libgomp's default, whose idle threads
                        spin), side by side with their ratios. Each of the four runs in its own child
                        process, since libgomp reads the policy once, when llama.cpp's library loads.

The first four size the KV LRU: a state costs its bytes for as long as it is kept, and restoring it
costs the load time instead of re-evaluating the prompt. The last says why agentd sets the policy.
Figures only, no assertions.

    python bench/inference_bench.py
    python bench/inference_bench.py --tokens 2000 --repeats 3 --threads 2
    python bench/inference_bench.py --wait-policy-only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.inference.kv_cache import capture, restore
from runtime.inference.local import LocalModel
from runtime.inference.model import Message
from runtime.inference.model_file import resolve_model


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


# One prompt for every wait-policy run; greedy decoding makes each run generate the same tokens.
COUNTING = [Message("user", "Count from 1 to 200 in words, separated by commas.")]
POLICIES = ("passive", "default")


def generation_child(args: argparse.Namespace) -> None:
    """One wait-policy run: generation tokens/s, as one JSON line on stdout."""
    # `import runtime` (above) set PASSIVE unless the variable was there already; llama.cpp's library is
    # not loaded yet, so what the environment holds now is what libgomp reads.
    assert "llama_cpp" not in sys.modules
    if args.child == "default":
        os.environ.pop("OMP_WAIT_POLICY", None)
    else:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    model = LocalModel(resolve_model(args.model), n_ctx=2048, n_threads=args.threads, kv_cache_bytes=0)
    prompt = model.render(COUNTING)
    model.complete(prompt, schema=None, max_tokens=8)  # warm: the prompt is cached for the timed runs
    rates, tokens = [], 0
    for _ in range(args.policy_runs):
        done = model.complete(prompt, schema=None, max_tokens=args.policy_tokens)
        tokens = done.stats.completion_tokens
        rates.append(tokens / done.stats.generation_s)
    print(json.dumps({"policy": os.environ.get("OMP_WAIT_POLICY"), "tokens": tokens,
                      "tok_s": statistics.median(rates), "runs": rates}))
    model.close()


def wait_policy(args: argparse.Namespace, threads: int) -> None:
    # "Idle" means nothing of this benchmark's own; the load average says what else was running.
    before = os.getloadavg()[0]
    results: dict[tuple[str, str], dict] = {}
    for load in ("idle", "busy"):
        for policy in POLICIES:
            results[load, policy] = run_child(args, threads, policy, busy=load == "busy")
    tokens = results["idle", "passive"]["tokens"]
    print(f"\nwait policy: generation, {threads} threads, {tokens} tokens, median of {args.policy_runs} runs "
          f"(1-minute load average {before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs)")
    print(f"  {'':18}{'PASSIVE':>14}{'unset':>14}{'PASSIVE / unset':>18}")
    for load, label in (("idle", "machine idle"), ("busy", "other core busy")):
        passive, default = results[load, "passive"]["tok_s"], results[load, "default"]["tok_s"]
        print(f"  {label:18}{passive:8.1f} tok/s{default:8.1f} tok/s{passive / default:17.1f}x")
    ratios = [results["busy", p]["tok_s"] / results["idle", p]["tok_s"] for p in POLICIES]
    print(f"  {'busy / idle':18}{ratios[0]:13.2f}x{ratios[1]:13.2f}x")


def run_child(args: argparse.Namespace, threads: int, policy: str, *, busy: bool) -> dict:
    command = [sys.executable, __file__, "--child", policy, "--threads", str(threads),
               "--policy-tokens", str(args.policy_tokens), "--policy-runs", str(args.policy_runs)]
    if args.model is not None:
        command += ["--model", str(args.model)]
    # What the user's environment holds for the policy is set aside: each child sets its own.
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    if done.returncode != 0:
        raise SystemExit(f"the {policy} run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="known model name or GGUF file (default: qwen2.5-coder-0.5b)")
    parser.add_argument("--tokens", type=int, default=4000, help="length of the long prompt (default 4000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each save/load timing (median shown)")
    parser.add_argument("--threads", type=int, help="generation threads (default: llama-cpp-python's choice; "
                        "for the wait policy, agentd's: one per CPU, at most 4)")
    parser.add_argument("--wait-policy-only", action="store_true", help="only the wait-policy comparison")
    parser.add_argument("--policy-tokens", type=int, default=32, help="tokens generated per wait-policy run")
    parser.add_argument("--policy-runs", type=int, default=3, help="timed runs per wait-policy case (median)")
    parser.add_argument("--child", choices=POLICIES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        generation_child(args)
        return
    # The wait-policy children run with the threads agentd would use (runtime/daemon/wiring.py).
    policy_threads = args.threads or min(4, os.cpu_count() or 1)
    if args.wait_policy_only:
        wait_policy(args, policy_threads)
        return

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

    wait_policy(args, policy_threads)


if __name__ == "__main__":
    main()
