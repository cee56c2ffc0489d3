"""agentd's runtime: the agent loop, inference, tools, skills, the harness, the daemon, the web page, the CLI."""

import os

# llama.cpp's portable build runs its threads on libgomp, whose idle threads spin on the CPU while
# they wait for work. With every core busy (the web page, a test, another process) the spinning
# threads compete with the ones computing, and generation fell 5-17x on a shared 2-core machine
# (bench/inference_bench.py, figures in bench/README.md). libgomp reads the policy once, when
# llama.cpp's library loads; agentd imports llama_cpp only from modules of this package, so setting
# it here comes first. A user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
