"""The review of a skill folder before it is installed: the tools it pre-approves, its scripts, and every
line a person should look at, rated by how much harm it could do.

Deterministic and lexical: nothing is run. What it rates high is what a person must read before
installing (deleting a home folder, reading keys, running decoded or downloaded code, obfuscated calls,
text telling the model to drop its rules); medium is what many honest skills do (a network call, a
command run from a string); low is for the record. `tests/fixtures/skill_review/` holds labelled benign
and malicious skills, and a test prints the review's precision and recall on them.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Literal, NamedTuple

from runtime.skills.files import UnreadableFile, read_regular

Severity = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")
Kind = Literal[
    "delete", "secrets", "decode", "obfuscation", "persistence", "network", "shell", "instruction", "path",
    "symlink", "special", "binary", "unread",
]

# Never installed, so never reviewed: version-control state and caches are not part of a skill, and
# .git/hooks alone would bury the review under executable samples.
IGNORED_NAMES = (".git", ".hg", ".svn", "__pycache__", ".DS_Store")

SCRIPT_SUFFIXES = frozenset({
    ".py", ".sh", ".bash", ".zsh", ".fish", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".lua",
    ".ps1", ".psm1", ".bat", ".cmd", ".mk",
})
# Files a build tool or an interpreter runs as they are, without a suffix saying so.
SCRIPT_NAMES = frozenset({"makefile", "gnumakefile", "justfile", "rakefile", "dockerfile", "taskfile"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
# A file over this is not read for the review, and the review says so.
REVIEW_MAX_BYTES = 4 << 20

# What `allowed-tools` lets a skill do in agentd without asking: for the person deciding whether to
# install it. At run time the tools' own contracts decide; a name here only explains it.
_ASKS = "without asking you first"
TOOL_MEANINGS = {
    "shell": f"runs any command on this machine, with your user's rights, {_ASKS}",
    "run_skill_script": f"runs any of this skill's scripts (listed below), with any arguments, {_ASKS}",
    "start_job": f"starts a background command that keeps running, {_ASKS}",
}
NEVER_ASKS = frozenset({
    "read_file", "list_files", "write_file", "edit_file", "append_file", "read_artifact", "read_skill_file", "delegate",
})


class Finding(NamedTuple):
    path: Path  # relative to the skill folder
    line: int | None
    severity: Severity
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


class PreApproval(NamedTuple):
    tool: str
    means: str  # what a task that took in the skill may then do without a person's approval


@dataclass(frozen=True)
class Review:
    folder: Path
    scripts: tuple[Script, ...]
    findings: tuple[Finding, ...]
    pre_approved: tuple[PreApproval, ...] = ()
    allowed_tools_line: int | None = None

    @property
    def self_contained(self) -> bool:
        """False if a symlink leads outside or an entry is not a plain file: a copy would differ from the review."""
        return not any(f.kind in ("symlink", "special") for f in self.findings)

    def by_severity(self) -> dict[Severity, list[Finding]]:
        return {s: [f for f in self.findings if f.severity == s] for s in SEVERITIES}


def review(folder: Path, allowed_tools: Iterable[str] = ()) -> Review:
    """Read every file under `folder` (nothing is run or changed) and say what needs a human look.

    `allowed_tools` is the skill's `allowed-tools` as loading read it; without it, the review reads
    the field's line itself, so a folder that does not load is still reviewed."""
    root = folder.resolve()
    scripts: list[Script] = []
    findings: list[Finding] = []
    skill_md = ""
    for path in _walk(root):
        rel = path.relative_to(root)
        if path.is_symlink():
            reason = _symlink_problem(path, root)
            if reason:
                findings.append(Finding(rel, None, "high", "symlink", reason))
            continue
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):
            # Reading a FIFO would hang the review, and no copy of a device is what its author had.
            findings.append(Finding(rel, None, "high", "special", "not a regular file (a device, FIFO or socket)"))
            continue
        executable = bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
        try:
            data = read_regular(path, REVIEW_MAX_BYTES)
        except UnreadableFile as e:
            # A script nobody read may do anything; a large data file is most likely data.
            severity: Severity = "high" if _is_script(rel, executable, b"") else "medium"
            findings.append(Finding(rel, None, severity, "unread", f"not reviewed: {e.reason}; look at it yourself"))
            continue
        if _is_script(rel, executable, data):
            scripts.append(Script(rel, len(data), hashlib.sha256(data).hexdigest(), executable))
            if _is_binary(data):
                findings.append(
                    Finding(rel, None, "high", "binary", "executable binary: it cannot be reviewed as text")
                )
                continue
            text = _text(data)
            findings += _scan_code(rel, enumerate(text.split("\n"), start=1))
            findings += _scan_instructions(rel, text)
        elif not _is_binary(data):
            text = _text(data)
            findings += _scan_instructions(rel, text)
            if rel.suffix.lower() in MARKDOWN_SUFFIXES:
                # The model may run what a code block shows as readily as a script.
                findings += _scan_code(rel, _markdown_code(text))
                findings += _scan_prose_secrets(rel, text)
            else:
                # A .txt of steps or a config file's hook runs as readily as a script does.
                findings += _scan_code(rel, enumerate(text.split("\n"), start=1))
            if rel == Path("SKILL.md"):
                skill_md = text
                findings += _scan_paths(rel, text, root)
    tools = tuple(allowed_tools) or _allowed_tools(skill_md)
    findings = _without_repeats(findings)
    findings.sort(key=lambda f: (SEVERITIES.index(f.severity), str(f.path), f.line or 0))
    return Review(
        folder, tuple(sorted(scripts, key=lambda s: str(s.path))), tuple(findings),
        pre_approved=tuple(_pre_approval(t) for t in tools), allowed_tools_line=_field_line(skill_md, "allowed-tools"),
    )


def _pre_approval(tool: str) -> PreApproval:
    if tool in TOOL_MEANINGS:
        return PreApproval(tool, TOOL_MEANINGS[tool])
    if tool in NEVER_ASKS:
        return PreApproval(tool, "never asks anyway, so this changes nothing")
    return PreApproval(
        tool, "not an agentd tool: pre-approves nothing, unless a plugin adds a tool by this name, "
        f"which would then run {_ASKS}",
    )


def _field_line(skill_md: str, field: str) -> int | None:
    """The SKILL.md line a top-level frontmatter field is on, if it is in the frontmatter."""
    lines = skill_md.split("\n")
    if lines[0].lstrip("\ufeff").strip() != "---":
        return None
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == "---":
            return None
        if re.match(rf"{re.escape(field)}\s*:", line):
            return number
    return None


def _allowed_tools(skill_md: str) -> tuple[str, ...]:
    line = _field_line(skill_md, "allowed-tools")
    if line is None:
        return ()
    value = skill_md.split("\n")[line - 1].split(":", 1)[1]
    return tuple(t for t in re.split(r"[\s,\[\]\"']+", value) if t)


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
    named = rel.suffix.lower() in SCRIPT_SUFFIXES or rel.name.lower() in SCRIPT_NAMES
    return in_scripts or executable or named or data.startswith(b"#!")


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _text(data: bytes) -> str:
    # Line numbers as an editor shows them, whichever line endings the author's editor wrote.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _patterns(*pairs: tuple[str, str], flags: int = 0) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, flags), label) for pattern, label in pairs)


def _severity(reason: str) -> Severity:
    # "Run it without asking" is also how honest docs describe a script that needs no input.
    return "medium" if reason == _UNASKED else "high"


# -- code: scripts, code blocks and inline code, other text files ---------------------------------------

# Where a path names the user's home or the whole disk: what a recursive delete must not reach.
_HOME_OR_ROOT = re.compile(
    r"""(?:^|[\s"'=(,])(?:~|\$\{?HOME\}?|\$env:USERPROFILE|%USERPROFILE%|\$env:HOMEPATH|[A-Za-z]:\\)(?=[/\\\s"')*]|$)"""
    r"""|(?:^|[\s=(,])["']?/(?:\*|home|Users|root|etc|usr|var|boot|bin|lib)?(?=[\s"')]|$)"""
    r"""|Path\.home\(\)|expanduser\(|homedir\(\)|os\.environ\[["']HOME|getenv\(["']HOME|environ\.get\(["']HOME"""
)
_RECURSIVE_DELETE = re.compile(
    r"\brm\s+(?:-[-\w]*\s+)*-\w*[rR]|\brm\s+--recursive|\brm\s+(?:-[-\w]*\s+)*-\w*f\w*\s+-\w*[rR]"
    r"|\bshutil\.rmtree\b|\brmtree\(|\brimraf\b|\bfs\.(?:rm|rmdir)(?:Sync)?\([^)]*recursive"
    r"|\bRemove-Item\b[^\n]*-Recurse|\bdel\s+/[sq]\b|\bfind\s+\S+[^\n]*\s-delete\b|\brd\s+/s\b"
)
_DISK_WIPE = re.compile(r"\bmkfs(?:\.\w+)?\s|\bdd\s+[^\n]*\bof=/dev/(?!null\b)|\bshred\s+[^\n]*/dev/")

_SECRET_FILES = re.compile(
    r"\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)|\.aws/credentials|\.netrc\b|\.git-credentials|\.docker/config\.json"
    r"|\.kube/config|\.gnupg\b|\.password-store|/etc/shadow|\.config/gh/hosts"
)
# A folder of keys named as a path of its own: ~/.ssh, "$HOME"/.aws, Path.home() / ".ssh", or `-C ~ .ssh`.
_SECRET_DIRS = re.compile(r"""(?:^|(?<=[\s"'=/\\(]))\.(?:ssh|aws|gnupg|kube|azure|gcloud)(?=[\s"'/\\)]|$)""")

# Decoding that hides what runs, and runners of strings: the two together are a payload.
_DECODE = re.compile(
    r"\bbase64\s+(?:-\w+\s+)*(?:-d|--decode|-D)\b|\bb64decode\(|\bdecodebytes\(|\batob\(|FromBase64String"
    r"|Buffer\.from\([^)]*['\"]base64['\"]|\bbytes\.fromhex\(|\bcodecs\.decode\([^)]*rot|\bxxd\s+-r\b"
    r"|\bmarshal\.loads\(|\bzlib\.decompress\("
)
_RUNNER = re.compile(
    r"(?<![.\w])(?:exec|eval|compile)\s*\(|\bnew\s+Function\(|(?<![.\w])Function\(|\bInvoke-Expression\b|\biex\b"
    r"|\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|\b(?:ba|z|da|k)?sh\s+-c\b|\bos\.system\b"
)
_ENCODED_COMMAND = re.compile(r"\s-(?:EncodedCommand|enc|ec)\s+[A-Za-z0-9+/=]{16,}", re.IGNORECASE)

OBFUSCATION = _patterns(
    (r"\b__import__\s*\(", "__import__()"),
    # Not getattr(sys, "frozen"), the usual check for a bundled program.
    (r"\bgetattr\s*\(\s*(?:__builtins__|builtins|os|subprocess|importlib|__import__)\b", "getattr() on a module"),
    (r"""\bgetattr\s*\([^)]*["'](?:system|popen|exec\w*|eval|spawn\w*|Popen|check_output)["']""",
     "getattr() of a command runner"),
    (r"\bglobals\(\)\s*\[|\b__builtins__\s*(?:\[|\.__dict__)", "a builtin looked up by name"),
    (r"(?:\bchr\(\s*\d+\s*\)\s*\+\s*){3,}", "a string built from chr()"),
    (r"(?:\\x[0-9a-fA-F]{2}){16,}", "a hex-escaped string"),
    (r"String\.fromCharCode\((?:\s*\d+\s*,){5,}", "String.fromCharCode()"),
)

# Running something straight from the network, or a raw connection: the classic one-liners.
_DOWNLOAD_AND_RUN = re.compile(
    r"\b(?:curl|wget|iwr|irm|Invoke-WebRequest|Invoke-RestMethod)\b[^\n|]*\|\s*(?:sudo\s+)?"
    r"(?:(?:ba|z|da|k)?sh|python3?|node|perl|ruby|iex|Invoke-Expression)\b"
    r"|\b(?:ba|z)?sh\s+(?:-c\s+)?[\"']?\$\((?:curl|wget)\b|\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b"
    r"|\b(?:iex|Invoke-Expression)\b[^\n]*\b(?:DownloadString|Invoke-WebRequest|Invoke-RestMethod|iwr|irm)\b"
)
_RAW_CONNECTION = re.compile(r"/dev/(?:tcp|udp)/|\bnc\s+(?:-\w+\s+)*-e\b|\bsocat\b[^\n]*exec:")
_PERSISTENCE = re.compile(
    r"\bcrontab\b|>>?\s*[\"']?(?:~|\$HOME)/\.(?:bashrc|zshrc|profile|bash_profile|zprofile)\b|\.config/autostart"
    r"|LaunchAgents|\bsystemctl\s+--user\s+enable\b|\bschtasks\s+/create\b|authorized_keys"
)

NETWORK = _patterns(
    (r"\bcurl\b", "curl"),
    (r"\bwget\b", "wget"),
    (r"\bnc\s", "nc"),
    (r"\b(?:ncat|netcat|telnet|ssh|scp|sftp|rsync)\s", "a network client"),
    (r"\brequests\.", "requests"),
    (r"\burllib", "urllib"),
    (r"\bhttp\.client\b", "http.client"),
    (r"\b(?:httpx|aiohttp)\b", "an HTTP client"),
    (r"\bsocket\b", "socket"),
    (r"\bfetch\(", "fetch()"),
    (
        r"\b(?:XMLHttpRequest|axios|Net::HTTP|LWP::|Net\.WebClient|Invoke-WebRequest|Invoke-RestMethod)",
        "an HTTP client",
    ),
    flags=re.IGNORECASE,
)

# Command substitution is ordinary shell; what runs a string as a program is what deserves a look.
SHELL = _patterns(
    (r"\bsubprocess\b", "subprocess"),
    (r"\bos\.system\b", "os.system"),
    (r"\bos\.popen\b", "os.popen"),
    (r"\bos\.(?:exec|spawn)\w*", "os.exec"),
    # Not `model.eval()` (PyTorch) or `re.compile`: only a bare call or the shell builtin runs a string.
    (r"(?<![.\w$-])eval\b(?!-)", "eval"),
    (r"(?<![.\w])exec\s*\(", "exec()"),
    (r"\b(?:ba|z|da|k)?sh\s+-c\b", "sh -c"),
    (r"\|\s*(?:ba|z|da|k)?sh\b", "a pipe into sh"),
    (r"\bchild_process\b", "child_process"),
    (r"(?<![.\w])system\s*\(", "system()"),
    (r"\b(?:Invoke-Expression|iex)\b", "Invoke-Expression"),
)


def _scan_code(rel: Path, lines: Iterable[tuple[int, str]]) -> list[Finding]:
    findings: list[Finding] = []
    decoded_at: int | None = None
    runs_strings = False
    for number, line in lines:
        found = list(_code_findings(line))
        findings += [Finding(rel, number, severity, kind, reason) for severity, kind, reason in found]
        if _DECODE.search(line) and decoded_at is None:
            decoded_at = number
        runs_strings = runs_strings or bool(_RUNNER.search(line))
    if (
        decoded_at is not None
        and runs_strings
        and not any(f.kind == "decode" and f.severity == "high" for f in findings)
    ):
        reason = "decodes hidden data and runs strings as code in the same file: read what it decodes"
        findings.append(Finding(rel, decoded_at, "high", "decode", reason))
    return findings


def _code_findings(line: str) -> Iterator[tuple[Severity, Kind, str]]:
    delete = _RECURSIVE_DELETE.search(line)
    if delete:
        if _HOME_OR_ROOT.search(line[delete.start():]):
            yield "high", "delete", f"deletes recursively in your home folder or at the root: {_excerpt(line)}"
        else:
            yield "medium", "delete", f"deletes files recursively: {_excerpt(line)}"
    if _DISK_WIPE.search(line):
        yield "high", "delete", f"overwrites a disk: {_excerpt(line)}"
    secret = _SECRET_FILES.search(line) or _SECRET_DIRS.search(line)
    if secret:
        yield "high", "secrets", f"reaches for keys or credentials ({secret[0].strip()}): {_excerpt(line)}"
    decode = _DECODE.search(line)
    if decode and _RUNNER.search(line):
        yield "high", "decode", f"decodes data and runs it: {_excerpt(line)}"
    elif decode or _ENCODED_COMMAND.search(line):
        yield "medium", "decode", f"decodes hidden data: {_excerpt(line)}"
    hits = [label for pattern, label in OBFUSCATION if pattern.search(line)]
    if hits:
        yield "high", "obfuscation", f"hides what it calls: {', '.join(hits)}"
    if _PERSISTENCE.search(line):
        yield "high", "persistence", f"makes itself run again later or lets someone in: {_excerpt(line)}"
    if _DOWNLOAD_AND_RUN.search(line):
        yield "high", "network", f"runs code straight from the network: {_excerpt(line)}"
    elif _RAW_CONNECTION.search(line):
        yield "high", "network", f"opens a raw connection that can carry a shell: {_excerpt(line)}"
    else:
        hits = list(dict.fromkeys(label for pattern, label in NETWORK if pattern.search(line)))
        if hits:
            yield "medium", "network", f"network access: {', '.join(hits)}"
    hits = list(dict.fromkeys(label for pattern, label in SHELL if pattern.search(line)))
    if hits:
        yield "medium", "shell", f"runs a command: {', '.join(hits)}"


def _excerpt(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= 100 else text[:97] + "..."


_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def _markdown_code(text: str) -> Iterator[tuple[int, str]]:
    """Each line of a code block whole, and of prose only its `inline code`."""
    fence = None
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if fence is None:
            if stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
                continue
            spans = [m[2] for m in _INLINE_CODE.finditer(line)]
            if spans:
                yield number, "  ".join(spans)
        elif stripped.startswith(fence):
            fence = None
        else:
            yield number, line


def _scan_prose_secrets(rel: Path, text: str) -> list[Finding]:
    """Prose that names a key or credential file: high, since the model reads prose as instructions;
    a mention of ~/.ssh or ~/.aws alone is often a setup guide's, so medium."""
    findings = []
    for number, line in enumerate(text.split("\n"), start=1):
        found = _SECRET_FILES.search(line)
        if found:
            findings.append(Finding(rel, number, "high", "secrets", f"names a key or credential file ({found[0]})"))
        elif _SECRET_DIRS.search(line):
            findings.append(Finding(rel, number, "medium", "secrets", "names a folder of keys or credentials"))
    return findings


# -- instructions ------------------------------------------------------------------------------------------


def _phrase(words: str) -> str:
    # Markdown wraps lines anywhere, so each space of a phrase stands for any run of whitespace.
    return r"\b" + r"\s+".join(words.split(" ")) + r"\b"


_IGNORE = "tells the model to ignore its instructions"
_HIDE = "tells the model to hide things from the user"
_UNASKED = "tells the model to act without asking"
INSTRUCTIONS = _patterns(
    (_phrase("ignore (?:all )?(?:of )?(?:the |your |any )?(?:previous|prior|above|earlier|other) "
             "(?:instructions|rules|prompts?)"), _IGNORE),
    (_phrase("ignore (?:all|any) (?:of )?(?:the |your )?(?:rules|instructions|guidelines|policies)"), _IGNORE),
    (_phrase("ignore (?:the |your )?(?:system prompt|safety|guidelines|policies)"), _IGNORE),
    (_phrase("(?:disregard|override|forget) (?:all |any )?(?:of )?(?:the |your )?"
             "(?:system prompt|previous|prior|instructions|rules)"), _IGNORE),
    # Reworded: "forget all earlier guidance", "Disregard everything above".
    (_phrase("(?:disregard|ignore|forget|override|drop) (?:all |any )?(?:of )?(?:the |your )?"
             "(?:earlier|previous|prior|above|original|initial|existing|standing|safety) "
             "(?:guidance|guidelines|instructions|rules|directions|directives|prompts?|constraints|policies)"),
     _IGNORE),
    (_phrase("(?:disregard|ignore|forget|override) (?:all |any )?(?:of )?(?:everything|anything|all|what) "
             "(?:(?:you (?:were|have been|'ve been) told )|(?:that came |was said |is written )?)"
             "(?:above|before|earlier|previously|so far|until now)"), _IGNORE),
    (_phrase("(?:the )?(?:above|previous|prior|earlier|other) (?:instructions|rules|guidelines) "
             "(?:no longer|do not|don't) apply"), _IGNORE),
    (_phrase("you are (?:now )?(?:in )?(?:developer|god|jailbreak|unrestricted|DAN) mode"), _IGNORE),
    # Not "do not tell the user to ...": that is advice on wording, not on hiding anything.
    (_phrase("(?:do not|don't|never) (?:tell|inform|notify|alert|show) the user") + r"(?!\s+to\b)", _HIDE),
    (_phrase("(?:do not|don't|never) (?:mention|reveal|disclose|report) (?:this|these|that|it|them) "
             "(?:step |steps |instructions? )?to the user"), _HIDE),
    (_phrase("without (?:telling|informing|notifying) the user"), _HIDE),
    (_phrase("without the user(?:'s)? (?:knowledge|knowing|noticing|consent)"), _HIDE),
    (_phrase("(?:silently|quietly|secretly|covertly) (?:run|execute|send|upload|delete|copy|post|install|remove)"),
     _HIDE),
    (_phrase("without (?:asking|approval|permission|confirmation|confirming)"), _UNASKED),
    (_phrase("(?:bypass|skip|circumvent|avoid) (?:the |any )?(?:approvals?|confirmation|sandbox|safety checks?)"),
     "tells the model to get around approval or safety checks"),
    flags=re.IGNORECASE,
)


# Text that dresses as something other than data: a chat template's role markers, and the labels agentd
# gives its own blocks and notices (context.py). Neutralized where they are shown (blocks.neutralize
# breaks the special tokens and the data fence), and flagged, so that a document or a tool result that
# carries them ranks lower and a person reading the manifest sees why. Only the labels that frame a
# request's instruction, decision and data: those named like HTML elements or common words (summary,
# tools, changes) would flag honest text, and an MCP tool whose description is flagged is not offered.
_ROLE = "imitates a chat role's marker"
_HARNESS = "imitates agentd's own labels"
_AGENTD_TAGS = "request|decision|notifications|rejected|step|data"
IMPERSONATIONS = _patterns(
    (r"<\|\s*(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id|system|user|assistant)"
     r"\s*\|>|\[/?INST\]|<</?SYS>>", _ROLE),
    (r"(?im)(?<![^\n])[ \t>#*]*\b(?:system|assistant|developer)[ \t]*:(?=[ \t]*\S)", _ROLE),
    (rf"(?i)</?[ \t]*(?:{_AGENTD_TAGS})(?:[ \t][^<>\n]*)?>", _HARNESS),
    (r"(?i)\[(?:approval|job|file|files|mode|schedule)/[a-z_]+\]", _HARNESS),
)


def instruction_flags(text: str) -> list[str]:
    """Instruction-like phrases in `text`, one per reason and phrase, as `reason: "phrase"`: what a
    person reading a manifest is shown of data that reads like orders (an MCP result, a document), or
    that dresses as a role or as agentd's own words."""
    found: dict[str, None] = {}
    for pattern, reason in (*INSTRUCTIONS, *IMPERSONATIONS):
        for m in pattern.finditer(text):
            found[f'{reason}: "{" ".join(m[0].split())}"'] = None
    return list(found)


def _scan_instructions(rel: Path, text: str) -> list[Finding]:
    findings = {}
    for pattern, reason in INSTRUCTIONS:
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            quoted = " ".join(m[0].split())
            finding = Finding(rel, line, _severity(reason), "instruction", f'{reason}: "{quoted}"')
            findings.setdefault((line, reason), finding)
    return list(findings.values())


# -- paths in SKILL.md -------------------------------------------------------------------------------------

# A token that starts a path: at the start of a line or after a space, quote, bracket or `=`. Not after
# `<`, so `</sub>` is a closing tag, and URLs are not matched because their slashes follow a colon.
_ABSOLUTE = re.compile(r"(?:^|(?<=[\s(\[\"'`=]))(~?/[\w.~-][^\s()\[\]<>\"'`,;]*)", re.MULTILINE)
_RELATIVE = re.compile(r"(?:^|(?<=[\s(\[<\"'`=]))((?:[\w.-]+/)*\.\./[^\s()\[\]<>\"'`,;]*)", re.MULTILINE)


def _scan_paths(rel: Path, text: str, root: Path) -> list[Finding]:
    findings = []
    for number, line in enumerate(text.split("\n"), start=1):
        for m in _ABSOLUTE.finditer(line):
            if _SECRET_FILES.search(m[1]) or _SECRET_DIRS.search(m[1]):
                continue  # flagged as a key or credential, higher up
            findings.append(Finding(rel, number, "low", "path", f"refers to {_token(m)}, outside the skill folder"))
        for m in _RELATIVE.finditer(line):
            where = os.path.normpath(os.path.join(root, rel.parent, _token(m)))
            if not Path(where).is_relative_to(root):
                findings.append(Finding(rel, number, "low", "path", f"refers to {_token(m)}, outside the skill folder"))
    return findings


def _token(m: re.Match[str]) -> str:
    # Prose ends sentences after paths; the full stop is not part of the path.
    return m[1].rstrip(".:!?")


def _without_repeats(findings: list[Finding]) -> list[Finding]:
    """One finding of each kind per line, the most severe: a code block's line is also prose, and an
    inline span also its line."""
    kept: dict[tuple[Path, int | None, str, str], Finding] = {}
    for f in sorted(findings, key=lambda f: SEVERITIES.index(f.severity)):
        # Instructions differ by what they say; every other kind is one finding per line.
        key = (f.path, f.line, f.kind, f.reason if f.kind in ("instruction", "path") else "")
        kept.setdefault(key, f)
    return list(kept.values())
