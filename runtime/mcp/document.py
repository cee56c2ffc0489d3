"""An MCP server's resource or argument-free prompt, read as text for evidence, with where it came from.

Read once when the server starts (as its tool list is), bounded in number and size: a server is asked
for what it offers, and nothing it says is taken as more than data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

# A server may list any number of resources; agentd reads this many, in the server's order.
MAX_DOCUMENTS = 50
# And keeps this much of each: evidence is packed within a budget of a few hundred tokens anyway.
MAX_CHARS = 64 * 1024
_REF_UNSAFE = re.compile(r"[@#\s]+")


@dataclass(frozen=True)
class Document:
    server: str
    kind: Literal["resource", "prompt"]
    # A resource's uri, or `prompt:NAME` for a prompt.
    ref: str
    title: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def doc_id(self) -> str:
        """Its id as evidence: a cite is `<id>@<version>#<anchor>`, so the uri keeps neither sign, nor spaces."""
        return f"mcp:{self.server}:{_REF_UNSAFE.sub('-', self.ref)}"


async def read_all(server: str, session: Any) -> list[Document]:
    """The server's text resources and its prompts that need no argument, as its capabilities offer them."""
    import mcp_types as types

    capabilities = session.server_capabilities
    found: list[Document] = []
    if capabilities is not None and capabilities.resources is not None:
        for resource in await _paged(session.list_resources, "resources", types):
            if len(found) >= MAX_DOCUMENTS:
                break
            read = await session.read_resource(str(resource.uri))
            text = "\n".join(c.text for c in getattr(read, "contents", []) if isinstance(c, types.TextResourceContents))
            if text.strip():
                found.append(Document(server, "resource", str(resource.uri), resource.title or resource.name,
                                      text[:MAX_CHARS]))
    if capabilities is not None and capabilities.prompts is not None:
        for prompt in await _paged(session.list_prompts, "prompts", types):
            if len(found) >= MAX_DOCUMENTS:
                break
            if any(a.required for a in prompt.arguments or ()):
                continue  # agentd would have to make its arguments up
            got = await session.get_prompt(prompt.name)
            text = "\n".join(m.content.text for m in getattr(got, "messages", [])
                             if isinstance(m.content, types.TextContent))
            if text.strip():
                found.append(Document(server, "prompt", f"prompt:{prompt.name}", prompt.title or prompt.name,
                                      text[:MAX_CHARS]))
    return found


async def _paged(listing, field: str, types) -> list:
    items, cursor = [], None
    while True:
        page = await listing(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items += getattr(page, field)
        cursor = page.next_cursor
        if not cursor or len(items) >= MAX_DOCUMENTS:
            return items
