"""The review of a skill folder before it is installed: its scripts, and every line a person should look at."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Literal, NamedTuple

Kind = Literal["network", "shell", "instruction", "path", "symlink", "special", "binary"]

# Never installed, so never reviewed: version-control state and caches are not part of a skill, and
# .git/hooks alone would bury the review under executable samples.
IGNORED_NAMES = (".git", ".hg", ".svn", "__pycache__", ".DS_Store")

SCRIPT_SUFFIXES = frozenset({".py", ".sh", ".bash", ".js", ".rb", ".pl"})


class Finding(NamedTuple):
    path: Path  # relative to the skill folder
    line: int | None
    kind: Kind
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.kind}: {self.reason}"


class Script(NamedTuple):
    path: Path  # relative to the skill folder
    size: int
    sha256: str
    executable: bool


@dataclass(frozen=True)
class Review:
    folder: Path
    scripts: tuple[Script, ...]
    findings: tuple[Finding, ...]

    @property
    def self_contained(self) -> bool:
        """False if a symlink leads outside or an entry is not a plain file: a copy would differ from the review."""
        return not any(f.kind in ("symlink", "special") for f in self.findings)


def review(folder: Path) -> Review:
    """Read every file under `folder` (nothing is run or changed) and say what needs a human look."""
    root = folder.resolve()
    scripts: list[Script] = []
    findings: list[Finding] = []
    for path in _walk(root):
        rel = path.relative_to(root)
        if path.is_symlink():
            reason = _symlink_problem(path, root)
            if reason:
                findings.append(Finding(rel, None, "symlink", reason))
            continue
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):
            # Reading a FIFO would hang the review, and no copy of a device is what its author had.
            findings.append(Finding(rel, None, "special", "not a regular file (a device, FIFO or socket)"))
            continue
        data = path.read_bytes()
        executable = bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
        if _is_script(rel, executable, data):
            scripts.append(Script(rel, len(data), hashlib.sha256(data).hexdigest(), executable))
            if _is_binary(data):
                findings.append(Finding(rel, None, "binary", "executable binary: it cannot be reviewed as text"))
            else:
                findings += _scan_commands(rel, enumerate(_text(data).split("\n"), start=1))
        elif not _is_binary(data):
            text = _text(data)
            findings += _scan_instructions(rel, text)
            if rel.suffix.lower() in (".md", ".markdown"):
                # The model may run what a code block shows as readily as a script.
                findings += _scan_commands(rel, _code_block_lines(text))
            if rel == Path("SKILL.md"):
                findings += _scan_paths(rel, text, root)
    findings.sort(key=lambda f: (str(f.path), f.line or 0))
    return Review(folder, tuple(sorted(scripts, key=lambda s: str(s.path))), tuple(findings))


def _walk(root: Path) -> Iterator[Path]:
    for current, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_NAMES)
        base = Path(current)
        # os.walk lists a symlink to a folder among the folders and does not descend; review the link itself.
        for name in dirs:
            if (base / name).is_symlink():
                yield base / name
        for name in sorted(files):
            if name not in IGNORED_NAMES:
                yield base / name


def _symlink_problem(link: Path, root: Path) -> str | None:
    target = os.readlink(link)
    resolved = link.resolve()
    if not resolved.is_relative_to(root):
        return f"symlink to {target} leads outside the skill folder"
    if os.path.isabs(target):
        # Inside today, but the installed copy would still point back at this folder.
        return f"symlink with the absolute target {target}: the installed copy would point outside itself"
    return None


def _is_script(rel: Path, executable: bool, data: bytes) -> bool:
    in_scripts = rel.parts[0] == "scripts"
    return in_scripts or executable or rel.suffix.lower() in SCRIPT_SUFFIXES or data.startswith(b"#!")


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _text(data: bytes) -> str:
    # Line numbers as an editor shows them, whichever line endings the author's editor wrote.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _patterns(*pairs: tuple[str, str], flags: int = 0) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, flags), label) for pattern, label in pairs)


NETWORK = _patterns(
    (r"\bcurl\b", "curl"),
    (r"\bwget\b", "wget"),
    (r"\bnc\s", "nc"),
    (r"\b(?:ncat|netcat|telnet|ssh|scp|sftp|rsync)\s", "a network client"),
    (r"/dev/(?:tcp|udp)/", "/dev/tcp"),
    (r"\brequests\.", "requests"),
    (r"\burllib", "urllib"),
    (r"\bhttp\.client\b", "http.client"),
    (r"\b(?:httpx|aiohttp)\b", "an HTTP client"),
    (r"\bsocket\b", "socket"),
    (r"\bfetch\(", "fetch()"),
    (r"\b(?:XMLHttpRequest|axios|Net::HTTP|LWP::)", "an HTTP client"),
    (r"\bhttps?://", "a URL"),
    flags=re.IGNORECASE,
)

# Command substitution is ordinary shell; what runs a string as a program is what deserves a look.
SHELL = _patterns(
    (r"\bsubprocess\b", "subprocess"),
    (r"\bos\.system\b", "os.system"),
    (r"\bos\.popen\b", "os.popen"),
    (r"\bos\.(?:exec|spawn)\w*", "os.exec"),
    (r"\beval\b", "eval"),
    (r"\bexec\s*\(", "exec()"),
    (r"\b(?:ba|z|da|k)?sh\s+-c\b", "sh -c"),
    (r"\|\s*(?:ba|z|da|k)?sh\b", "a pipe into sh"),
    (r"\bchild_process\b", "child_process"),
    (r"(?<![.\w])system\s*\(", "system()"),
)


def _scan_commands(rel: Path, lines: Iterable[tuple[int, str]]) -> list[Finding]:
    findings = []
    for number, line in lines:
        for kind, patterns, what in (("network", NETWORK, "network access"), ("shell", SHELL, "runs a command")):
            hits = list(dict.fromkeys(label for pattern, label in patterns if pattern.search(line)))
            if hits:
                findings.append(Finding(rel, number, kind, f"{what}: {', '.join(hits)}"))
    return findings


def _code_block_lines(text: str) -> Iterator[tuple[int, str]]:
    fence = None
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if fence is None:
            if stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
        elif stripped.startswith(fence):
            fence = None
        else:
            yield number, line


def _phrase(words: str) -> str:
    # Markdown wraps lines anywhere, so each space of a phrase stands for any run of whitespace.
    return r"\b" + r"\s+".join(words.split(" ")) + r"\b"


_IGNORE = "tells the model to ignore its instructions"
_HIDE = "tells the model to hide things from the user"
INSTRUCTIONS = _patterns(
    (_phrase("ignore (?:all )?(?:of )?(?:the |your |any )?(?:previous|prior|above|earlier|other) "
             "(?:instructions|rules|prompts?)"), _IGNORE),
    (_phrase("ignore (?:all|any) (?:of )?(?:the |your )?(?:rules|instructions|guidelines|policies)"), _IGNORE),
    (_phrase("ignore (?:the |your )?(?:system prompt|safety|guidelines|policies)"), _IGNORE),
    (_phrase("(?:disregard|override|forget) (?:all |any )?(?:of )?(?:the |your )?"
             "(?:system prompt|previous|prior|instructions|rules)"), _IGNORE),
    (_phrase("(?:do not|don't|never) (?:tell|inform|notify|alert|show) the user"), _HIDE),
    (_phrase("without (?:telling|informing|notifying) the user"), _HIDE),
    (_phrase("without (?:asking|approval|permission|confirmation|confirming)"),
     "tells the model to act without asking"),
    (_phrase("(?:bypass|skip|circumvent|avoid) (?:the |any )?(?:approvals?|confirmation|sandbox|safety checks?)"),
     "tells the model to get around approval or safety checks"),
    flags=re.IGNORECASE,
)


def _scan_instructions(rel: Path, text: str) -> list[Finding]:
    findings = {}
    for pattern, reason in INSTRUCTIONS:
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            quoted = " ".join(m[0].split())
            findings.setdefault((line, reason), Finding(rel, line, "instruction", f'{reason}: "{quoted}"'))
    return list(findings.values())


# A token that starts a path: at the start of a line or after a space, quote, bracket or `=`; URLs are not
# matched because their slashes follow a colon.
_ABSOLUTE = re.compile(r"(?:^|(?<=[\s(\[<\"'`=]))(~?/[\w.~-][^\s()\[\]<>\"'`,;]*)", re.MULTILINE)
_RELATIVE = re.compile(r"(?:^|(?<=[\s(\[<\"'`=]))((?:[\w.-]+/)*\.\./[^\s()\[\]<>\"'`,;]*)", re.MULTILINE)


def _scan_paths(rel: Path, text: str, root: Path) -> list[Finding]:
    findings = []
    for number, line in enumerate(text.split("\n"), start=1):
        for m in _ABSOLUTE.finditer(line):
            findings.append(Finding(rel, number, "path", f"refers to {_token(m)}, outside the skill folder"))
        for m in _RELATIVE.finditer(line):
            where = os.path.normpath(os.path.join(root, rel.parent, _token(m)))
            if not Path(where).is_relative_to(root):
                findings.append(Finding(rel, number, "path", f"refers to {_token(m)}, outside the skill folder"))
    return findings


def _token(m: re.Match[str]) -> str:
    # Prose ends sentences after paths; the full stop is not part of the path.
    return m[1].rstrip(".:!?")
