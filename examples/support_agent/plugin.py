"""The support-agent example: an account store, three tools and the `support` profile (seed 000's worked case)."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.agent.profiles import Profile
from runtime.knowledge.evidence import terms
from runtime.tools import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused

HERE = Path(__file__).resolve().parent
# Not AGENTD_*: agentd reads every variable with that prefix as one of its own settings.
ACCOUNTS_ENV = "SUPPORT_AGENT_ACCOUNTS"
KEY_PREFIX = "sk-live-"

KeyStatus = Literal["active", "revoked", "expired"]


def accounts_path() -> Path:
    """The account store: the file next to this plugin unless the environment names another."""
    return Path(os.environ.get(ACCOUNTS_ENV) or HERE / "accounts.json")


class AccountStore:
    """Accounts in one JSON file. The key value is read here and leaves only as its last 4 characters."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def get(self, account_id: str) -> dict | None:
        return self._read().get(account_id)

    def rotate(self, account_id: str, today: date) -> str:
        """Give the account a new active key; returns it so the caller can check and clip it."""
        with self._lock:
            accounts = self._read()
            key = KEY_PREFIX + secrets.token_hex(16)
            accounts[account_id].update(key=key, key_status="active", key_created_at=today.isoformat())
            self._write(accounts)
        return key

    def _read(self) -> dict[str, dict]:
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _write(self, accounts: dict) -> None:
        # A reader sees the old file or the new one, never half of one, and a crash leaves the old one.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(accounts, f, indent=2)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise


class AccountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    account_id: str = Field(pattern=r"^A-[0-9]{3,6}$", description="the customer's account id, e.g. A-777")


ACCOUNT_ERRORS = {
    "other_tenant": "the account belongs to another tenant; nothing was read or changed",
    "unknown_account": "there is no account with that id; ask the customer for it",
}


class _AccountTool(Tool):
    def __init__(self, accounts: AccountStore) -> None:
        self.accounts = accounts

    def authorize(self, ctx: ToolContext, args: AccountArgs) -> None:
        account = self.accounts.get(args.account_id)
        if account is None:
            raise ToolRefused("unknown_account", f"there is no account {args.account_id}")
        if account["tenant"] != ctx.tenant:
            # Which tenant owns it is that tenant's business; the caller learns only that it is not theirs.
            raise ToolRefused("other_tenant", f"account {args.account_id} is not one of this customer's accounts")

    def _no_key_in(self, output: BaseModel) -> None:
        text = output.model_dump_json()
        key = (self.accounts.get(output.account_id) or {}).get("key", "")
        if KEY_PREFIX in text or (key and key in text):
            # The message goes to the model, so it says what went wrong and never what the key is.
            raise ToolFailure("key_exposed", "the result contained a key value and was withheld")


class KeyState(BaseModel):
    account_id: str
    key_status: KeyStatus
    plan: str
    key_created_at: str
    checked_at: str


class CheckApiKeyStatus(_AccountTool):
    contract = ToolContract(
        name="check_api_key_status",
        description="Read the status of an account's API key (active, revoked or expired) and the account's "
        "plan. Never shows the key. Use it before explaining any key error.",
        input_model=AccountArgs,
        output_model=KeyState,
        effects=(Effect.READ,),
        idempotent=True,
        scope="tenant",
        timeout_s=5,
        errors=ACCOUNT_ERRORS,
    )

    def run(self, ctx: ToolContext, args: AccountArgs) -> KeyState:
        account = self.accounts.get(args.account_id)
        return KeyState(
            account_id=args.account_id,
            key_status=account["key_status"],
            plan=account["plan"],
            key_created_at=account["key_created_at"],
            checked_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    def check(self, output: KeyState) -> None:
        self._no_key_in(output)


class Rotated(BaseModel):
    account_id: str
    key_status: Literal["active"]
    key_last4: str = Field(pattern=r"^[0-9a-f]{4}$")
    key_created_at: str


class RotateApiKey(_AccountTool):
    contract = ToolContract(
        name="rotate_api_key",
        description="Issue a new API key for an account and revoke the old one. A person must approve it first. "
        "Returns only the new key's last 4 characters.",
        input_model=AccountArgs,
        output_model=Rotated,
        effects=(Effect.WRITE, Effect.EXTERNAL),
        # A second run would revoke the key the first one issued: never retried.
        idempotent=False,
        needs_approval=True,
        scope="tenant",
        timeout_s=10,
        errors=ACCOUNT_ERRORS,
    )

    def run(self, ctx: ToolContext, args: AccountArgs) -> Rotated:
        today = datetime.now(UTC).date()
        key = self.accounts.rotate(args.account_id, today)
        return Rotated(
            account_id=args.account_id, key_status="active", key_last4=key[-4:], key_created_at=today.isoformat()
        )

    def check(self, output: Rotated) -> None:
        self._no_key_in(output)


class IncidentQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=200, description="words to look for, e.g. 401 api key")


class Incident(BaseModel):
    id: str
    started_at: str
    resolved_at: str | None
    summary: str
    products: list[str]


class Incidents(BaseModel):
    matches: list[Incident]


class SearchIncidents(Tool):
    contract = ToolContract(
        name="search_incidents",
        description="Search recent service incidents (outages, error spikes) that may explain a customer's errors. "
        "Public status data; at most 3 matches, best first.",
        input_model=IncidentQuery,
        output_model=Incidents,
        effects=(Effect.READ,),
        idempotent=True,
        scope="public",
        timeout_s=5,
    )

    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, ctx: ToolContext, args: IncidentQuery) -> Incidents:
        wanted = set(terms(args.query))
        scored = []
        for incident in json.loads(self.path.read_text(encoding="utf-8")):
            words = set(terms(f"{incident['summary']} {' '.join(incident['products'])}"))
            if hits := len(wanted & words):
                scored.append((-hits, incident["id"], incident))
        return Incidents(matches=[Incident(**i) for _, _, i in sorted(scored)[:3]])


PROFILE = Profile(
    name="support",
    role="Support assistant for API customers. Answer from the runbook and account state.",
    policy=(
        "Never print an API key value.",
        "Key rotation and deletion need a separate, authorized request: rotate_api_key waits for a person.",
        "Only the customer's own accounts. If they gave no account id, ask for it.",
        # Measured on the default model: with escalation offered and nothing said of when, it escalated a
        # revoked key it had diagnosed right, its diagnosis as the reason, in most support runs.
        "Answer what the runbook and the account state let you answer, a revoked or expired key included; "
        "escalate only what you cannot.",
    ),
    tool_guidance=(
        "Call check_api_key_status before you explain a key error.",
        "Call search_incidents when an error may hit many customers.",
        "Cite the runbook sections you used by their ids, e.g. runbook/api-keys@v7#rotation, and the tool "
        "results you used, e.g. result:c1.",
    ),
    # No examples: measured on the shipped eval cases, the default model copied whatever an example
    # held (an escalation's reason, another case's answer) into the customer's case word for word.
    # The output contract shows the form of each action.
    tools=("check_api_key_status", "rotate_api_key", "search_incidents"),
    knowledge=HERE / "knowledge",
    # Checked in code, not asked for in words: measured on both Qwen models, the answer came from the
    # runbook alone ("the key is revoked") without reading the account, in most support runs.
    answer_after=("check_api_key_status",),
    # And before anything else: measured on the default model with every tool offered at the first step,
    # it searched incidents and escalated without reading the account, or proposed the rotation an
    # injected runbook span asked for before it knew the key's state.
    call_first=("check_api_key_status",),
    # Measured on the default model with escalation offered from the start, it escalated its own diagnosis.
    escalate_only_when_blocked=True,
    # The policy's "separate, authorized request", in code: measured on the default model with rotation
    # offered, it proposed the rotation an injected runbook span asked for in every run of that case.
    on_request={"rotate_api_key": ("rotat", "new key", "replace the key", "reissue", "regenerate")},
)


def register(tools, profiles) -> None:
    accounts = AccountStore(accounts_path())
    tools.register(CheckApiKeyStatus(accounts))
    tools.register(RotateApiKey(accounts))
    tools.register(SearchIncidents(HERE / "incidents.json"))
    profiles[PROFILE.name] = PROFILE
