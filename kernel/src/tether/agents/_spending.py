"""An agent's budgets: the chain of accounts it spends under, what a request needs of them,
and the notices and records a budget writes (``agent.spending``, docs/budgets.md).

An agent spends under the budget of every holder above it: its ancestors that hold one (found
in this process, or read from the store when the parent is driven elsewhere) and itself, when
its own log holds a ``budget`` record or its spec sets one (a root's profile, ``tether run
--budget``, the Python API). A session under no budget has no spending (``None``): its requests
cost nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from ..budgets._accounts import (
    ANCESTRY_TTL,
    FIELDS,
    NOTHING,
    Account,
    Accounts,
    Charge,
    Overrun,
    Vector,
    budget_descriptor,
    charge_now,
    read_descriptor,
    settle_now,
    warning_descriptor,
    warning_text,
    warnings,
)
from ..budgets._counting import count_tree
from ..budgets._records import BUDGET_DESCRIPTOR, BUDGET_ORIGIN
from ..contracts import (
    Budget,
    ContextMessage,
    DescriptorEvent,
    Event,
    ModelRequest,
    ModelResponse,
    Price,
    RemoteAgentModel,
    SessionHeader,
    Spend,
)
from ..errors import BudgetError, ErrorCode
from ..ground import implements
from ..models import price_for
from ._lease import TEARDOWN_TIMEOUT

if TYPE_CHECKING:
    from ._agent import Agent

_OUTPUT = FIELDS.index("output_tokens")
_COST = FIELDS.index("cost")

__all__ = (
    "Spending",
    "charged_request",
    "child_budget",
    "enter_spending",
    "leave_spending",
    "open_spending",
    "priced",
)


class Spending:
    """What an agent spends under: its chain of accounts (outermost holder first)."""

    __slots__ = (
        "_rates",
        "accounts",
        "bounds_output",
        "chain",
        "counts_cost",
        "counts_input",
        "crossed",
        "deadline",
        "own",
        "price",
        "session_id",
    )

    def __init__(
        self,
        accounts: Accounts,
        session_id: str,
        chain: tuple[Account, ...],
        own: Account | None,
        price: Price | None,
    ) -> None:
        self.accounts = accounts
        self.session_id = session_id
        self.chain = chain
        """Every account the agent's requests are charged to."""
        self.own = own
        """The account of the budget this agent's session holds, if it holds one."""
        self.price = price
        """Its model's price (``None``: unknown; its requests' cost is unknown)."""
        self.counts_input = any(
            a.budget.input_tokens is not None or a.budget.cost is not None for a in chain
        )
        """Whether a request's input is estimated before it is sent (an input or cost limit)."""
        self.crossed = True
        """Whether a settle may have passed a warning share since :meth:`notices` looked."""
        self.counts_cost = any(a.budget.cost is not None for a in chain)
        """Whether a request's cost is bounded before it is sent (a cost limit)."""
        self.bounds_output = self.counts_cost or any(
            a.budget.output_tokens is not None for a in chain
        )
        """Whether a limit bounds what a request may answer (an output or a cost limit)."""
        deadline: tuple[float, Account] | None = None
        for account in chain:
            if account.deadline is not None and (
                deadline is None or account.deadline < deadline[0]
            ):
                deadline = (account.deadline, account)
        self.deadline = deadline
        """The first wall-clock deadline of the chain, and whose it is."""
        self._rates = (
            None
            if price is None
            else (
                price.input,
                price.input if price.cached_input is None else price.cached_input,
                price.input if price.cache_write is None else price.cache_write,
                price.output,
            )
        )

    def need(self, input_tokens: int, output_room: int | None) -> tuple[Vector, int | None]:
        """What a request with ``input_tokens`` in needs (by :data:`FIELDS`), and the most it
        may answer: the turn's own room (``output_room``) within what every output and cost
        limit leaves (``None``: no limit on it)."""
        if not self.bounds_output:
            return (input_tokens, 0, 0, 0.0, 0, 1, 0), output_room
        rates = self._rates
        # The most the input can cost (no cache hits; cache writes at their rate, if dearer).
        input_cost = 0.0 if rates is None else input_tokens * max(rates[0], rates[2]) / 1e6
        room = output_room
        for account in self.chain:
            budget = account.budget
            spent, held = account.sv, account.hv
            if budget.output_tokens is not None:
                left = int(budget.output_tokens - spent[_OUTPUT] - held[_OUTPUT])
                room = left if room is None or left < room else room
            if budget.cost is not None and rates is not None and rates[3] > 0:
                left_cost = budget.cost - spent[_COST] - held[_COST] - input_cost
                left = int(left_cost * 1e6 / rates[3])
                room = left if room is None or left < room else room
        output = 0 if room is None else max(room, 1)
        cost = 0.0
        if self.counts_cost and rates is not None:
            cost = input_cost + output * rates[3] / 1e6
        return (input_tokens, output, 0, cost, 0, 1, 0), (None if room is None else output)

    def begin(
        self, input_tokens: int, output_room: int | None
    ) -> tuple[Charge | Overrun | None, Vector, int | None]:
        """Charge a request with ``input_tokens`` in (:meth:`need`, then :func:`charge_now`):
        the charge (or the limit it would pass, or ``None``: :func:`charge` must wait or ask
        the store), what it needs and the most it may answer."""
        need, room = self.need(input_tokens, output_room)
        return charge_now(self.chain, need), need, room

    def end(self, done: Charge, response: ModelResponse | None) -> bool:
        """Settle ``done`` with what ``response`` spent (nothing without one) and look for the
        warning shares it passed (:meth:`notices` then reads them); ``False``: a store call
        is needed (:func:`settle`, with :meth:`spent`)."""
        actual = NOTHING if response is None else self.spent(response)
        if not settle_now(done, actual):
            return False
        for account in self.chain:
            spent = account.sv
            for entry in account.pending:
                if spent[entry[0]] >= entry[1]:
                    self.crossed = True
        return True

    def spent(self, response: ModelResponse) -> Vector:
        """What an answer spent (a remote agent's: what it reported of its own work)."""
        remote = response.remote_usage
        usage = response.usage if remote is None else remote
        rates = self._rates
        if rates is None or not self.counts_cost:
            # Cost counts against a cost limit only (what it was shows from the logs).
            unpriced = 1 if rates is None else 0
            cached = usage.cached_input_tokens
            return (usage.input_tokens, usage.output_tokens, cached, 0, unpriced, 1, 0)
        cached, written = usage.cached_input_tokens, usage.cache_write_input_tokens
        plain = max(usage.input_tokens - cached - written, 0)
        cost = (
            plain * rates[0]
            + cached * rates[1]
            + written * rates[2]
            + usage.output_tokens * rates[3]
        ) / 1_000_000
        return (usage.input_tokens, usage.output_tokens, cached, cost, 0, 1, 0)

    def notices(self) -> list[Event]:
        """The notices (and their records) of the limits that passed their warning share."""
        if not self.crossed and self.deadline is None:
            return []  # nothing passed a share since the last look (time has no share)
        self.crossed = False
        events: list[Event] = []
        for account, kind in warnings(self.chain):
            events.append(
                ContextMessage(
                    role="user", content=warning_text(account, kind), origin=BUDGET_ORIGIN
                )
            )
            events.append(warning_descriptor(account, kind))
        return events

    async def close(self) -> None:
        """The agent left: its accounts have one user fewer."""
        self.accounts.child_left(self.session_id)
        for account in self.chain:
            await self.accounts.close(account)
        self.accounts.chains.pop(self.session_id, None)


async def charged_request(agent: Agent, request: ModelRequest) -> ModelResponse:
    """``request`` sent on behalf of ``agent`` outside a turn's step (a compaction's summary),
    charged to its budgets first: refused (``BUDGET_EXCEEDED``) when they would pass."""
    from ..budgets._accounts import Overrun, charge, charge_now, settle
    from ..models import messages_tokens, schema_tokens
    from ._step import request_with_retries

    spending, limits = agent.spending, agent.spec.limits
    if spending is None:
        return await request_with_retries(agent.model, request, limits)
    tokens = schema_tokens(request.system, request.tools) + messages_tokens(request.messages)
    need, room = spending.need(tokens, request.max_output_tokens)
    done = charge_now(spending.chain, need) or await charge(spending.chain, need)
    if isinstance(done, Overrun):
        raise done.error()
    if room != request.max_output_tokens:
        request = request.model_copy(update={"max_output_tokens": room})
    spent = NOTHING
    try:
        response = await request_with_retries(agent.model, request, limits)
        spent = spending.spent(response)
        return response
    finally:
        with anyio.CancelScope(shield=True):
            await settle(done, spent)


def priced(agent: Agent) -> Price | None:
    """The price of ``agent``'s model: the profile's ``[prices]``, the model's own, tether's."""
    spec = agent.spec
    prices: Mapping[str, Price] | None = None
    runtime = spec.runtime
    if runtime is not None:
        prices = runtime.prices
    return price_for(spec.model_spec or agent.header.model, spec.model, prices)


async def open_spending(
    agent: Agent, record: DescriptorEvent | None, *, fresh: bool
) -> tuple[Spending | None, list[Event]]:
    """The spending of ``agent`` as it enters its session, and the ``budget`` record to store
    when its spec sets a budget its log does not hold yet. ``record``: the last ``budget``
    record of its log; ``fresh``: its session was created a moment ago (nothing spent)."""
    store, header = agent.spec.store, agent.header
    parent = header.parent_session
    wanted = agent.spec.budget
    if parent is None and record is None and wanted is None:
        return None, []  # a root under no budget: nothing to look up (every fresh session)
    accounts = Accounts.of(store)
    ancestors: tuple[Account, ...] = ()
    if parent is not None:
        found = accounts.chains.get(parent)
        if found is None:
            runtime = agent.spec.runtime
            above = runtime.live_agents.get(parent) if runtime is not None else None
            if above is not None:  # open here, under no budget
                found = above.spending.chain if above.spending is not None else ()
        ancestors = found if found is not None else await _ancestors(agent, accounts, header)
    events: list[Event] = []
    if record is None and not ancestors and wanted is None:
        return None, events
    price = priced(agent)
    runtime = agent.spec.runtime
    prices = runtime.prices if runtime is not None else None

    if wanted is not None:
        current = None
        if record is not None:
            try:
                current = read_descriptor(record, header.id)
            except BudgetError:
                current = None  # unreadable: the budget asked for now replaces it
        if current is None or current[0] != wanted:
            started = time.time()
            base = Spend() if fresh else await count_tree(store, header.id, prices, since=started)
            record = budget_descriptor(wanted, started, base)
            events.append(record)
    own: Account | None = None
    chain = ancestors
    if record is not None:
        budget, started, base = read_descriptor(record, header.id)
        new = fresh or bool(events)
        own = await accounts.open(header.id, budget, started, base, prices, new=new)
        chain = (*ancestors, own)
    for account in ancestors:
        account.users += 1
    remote = implements(agent.spec.model, RemoteAgentModel)
    if price is None and not remote:
        for account in chain:
            if account.budget.cost is not None:
                await _close_all(accounts, chain)
                model = agent.spec.model_spec or header.model or agent.spec.model.name
                raise BudgetError(
                    ErrorCode.BUDGET_INVALID,
                    f'the budget of session {account.holder} limits cost, and the model "{model}" '
                    "has no price",
                    where=f"session {header.id}",
                    remedy=f'give it one in the profile: [prices."{model}"] input = ..., '
                    "output = ... (US dollars per million tokens), or drop the cost limit",
                )
    accounts.chains[header.id] = chain
    if parent is not None:
        accounts.child_started(header.id, ancestors)
    return Spending(accounts, header.id, chain, own, price), events


async def _close_all(accounts: Accounts, chain: Sequence[Account]) -> None:
    for account in chain:
        await accounts.close(account)


async def _ancestors(
    agent: Agent, accounts: Accounts, header: SessionHeader
) -> tuple[Account, ...]:
    """The accounts of the holders above ``header``'s session when its parent is not open in
    this process (a child another process started): read from the store, root first; what
    each log above says is kept for :data:`ANCESTRY_TTL` seconds."""
    store, runtime = agent.spec.store, agent.spec.runtime
    prices = runtime.prices if runtime is not None else None
    records: list[tuple[str, DescriptorEvent]] = []
    parent = header.parent_session
    now = time.monotonic()
    while parent is not None:
        known = accounts.above.get(parent)
        if known is None or now - known[0] > ANCESTRY_TTL:
            above = await store.header(parent)
            record: DescriptorEvent | None = None
            for stored in await store.events(above.id):
                event = stored.event
                if isinstance(event, DescriptorEvent) and event.kind == BUDGET_DESCRIPTOR:
                    record = event
            known = accounts.above[parent] = (now, above.parent_session, record)
        if known[2] is not None:
            records.append((parent, known[2]))
        parent = known[1]
    chain: list[Account] = []
    for holder, record in reversed(records):
        budget, started, base = read_descriptor(record, holder)
        account = await accounts.open(holder, budget, started, base, prices)
        account.users -= 1  # counted as a user by the agent that enters (open_spending)
        chain.append(account)
    return tuple(chain)


async def enter_spending(agent: Agent, record: DescriptorEvent | None, *, fresh: bool) -> None:
    """Set ``agent.spending`` as it enters (:func:`open_spending`); a new ``budget`` record
    is stored with the first step's answer."""
    agent.spending, records = await open_spending(agent, record, fresh=fresh)
    if records:
        agent.lease.defer(*records)


async def leave_spending(agent: Agent) -> None:
    """The agent leaves: its accounts lose a user (shielded and bounded)."""
    spending, agent.spending = agent.spending, None
    if spending is not None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
            await spending.close()


def child_budget(wanted: Budget | None, chain: Sequence[Account]) -> Budget | None:
    """The budget a delegated child gets: what it asked for (its delegation's, or its declared
    agent's), within what the chain above it has left; ``None`` when it asked for none."""
    if wanted is None:
        return None
    from ..budgets._accounts import remainder

    return wanted.within(remainder(chain))
