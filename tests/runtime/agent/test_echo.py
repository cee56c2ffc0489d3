"""A call that would write agentd's own words into a file is refused before it runs."""

from __future__ import annotations

from runtime.agent import echo
from runtime.tools import AppendFile, EditFile, WriteFile
from store.events import Recorded, ToolCallExecuted

TODO = "book the venue\nwrite the release notes\nanswer the mail from the printer\nsend the survey\n"
REQUEST = "Copy the first item of my todo list (notes/todo.txt) into a new file next.txt."
SAID = (AppendFile.contract.description, EditFile.contract.description, WriteFile.contract.description,
        "If the results above answer the request, give the final answer: one full sentence that answers it.")
WRITTEN = ToolCallExecuted(call_id="c2", tool="write_file", status="ok",
                           observation={"path": "next.txt", "created": True, "diff": "+book the venue"})
READ_NEXT = ToolCallExecuted(call_id="c3", tool="read_file", status="ok",
                             observation={"path": "next.txt", "content": TODO})


def _log(*events) -> list[Recorded]:
    return [Recorded(i + 1, "t-1", i + 1, "t", "agentd", None, None, e) for i, e in enumerate(events)]


def test_an_edit_that_would_put_a_tools_description_in_a_file_is_refused() -> None:
    # Seen on the default model on seed 20261214: next.txt edited to end with append_file's description.
    line = AppendFile.contract.description.split("\n")[0]
    edit = {"path": "next.txt", "old": TODO.strip(), "new": TODO.strip() + "\n" + line}
    why = echo.refusal(EditFile.contract, edit, _log(WRITTEN, READ_NEXT), SAID, REQUEST)
    assert why is not None and why.startswith("this edit_file would put agentd's own words in next.txt"), why
    # So would appending it, or a new file made of the instructions.
    assert echo.refusal(AppendFile.contract, {"path": "next.txt", "text": line}, _log(READ_NEXT), SAID, REQUEST)
    made = {"path": "answer.txt", "content": "If the results above answer the request, give the final answer"}
    assert echo.refusal(WriteFile.contract, made, [], SAID, REQUEST) is not None


def test_the_users_text_is_written_though_it_shares_a_few_words_with_agentds() -> None:
    edit = {"path": "next.txt", "old": TODO.strip(), "new": "book the venue"}
    assert echo.refusal(EditFile.contract, edit, _log(READ_NEXT), SAID, REQUEST) is None
    # A short phrase agentd also uses ("in the workspace") is anyone's.
    line = {"path": "notes.md", "text": "Keep the backups in the workspace folder."}
    assert echo.refusal(AppendFile.contract, line, [], SAID, REQUEST) is None


def test_agentds_words_that_the_request_or_a_file_holds_are_the_users_too() -> None:
    line = AppendFile.contract.description.split("\n")[0]
    # The request quotes them: "Add the line '...' to notes.md".
    asked = f"Add the line '{line}' to notes.md"
    assert echo.refusal(AppendFile.contract, {"path": "notes.md", "text": line}, [], SAID, asked) is None
    # A file the task read has them: a page of docs about agentd, copied on purpose.
    docs = ToolCallExecuted(call_id="c1", tool="read_file", status="ok",
                            observation={"path": "docs/tools.md", "content": f"# Tools\n\n{line}\n"})
    copy = {"path": "tools.txt", "content": line}
    assert echo.refusal(WriteFile.contract, copy, _log(docs), SAID, "Copy the tools page into tools.txt") is None
