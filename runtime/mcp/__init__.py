"""MCP servers' tools behind agentd's two gateway checks: the connections (client), the tools (tool), the
checks (secret, result) and the gateway that ties them to a runtime (gateway).

Nothing is re-exported here: importing the SDK costs a command that uses no MCP server (starlette and
an HTTP client come with it), so each module is imported where it is used.
"""

# The trusted fact naming, per MCP tool a task pinned, the sha256 of its definition then.
FACT_MCP_PINNED = "mcp_pinned"
