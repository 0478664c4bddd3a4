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

from ..budgets._accounts import (
    Account,
    Accounts,
    budget_descriptor,
    read_descriptor,
    warning_descriptor,
    warning_text,
    warnings,
)
from ..budgets._counting import count_tree, spend_of
from ..budgets._records import BUDGET_DESCRIPTOR, BUDGET_ORIGIN
from ..contracts import (
    Budget,
    ContextMessage,
    DescriptorEvent,
    Event,
    ModelResponse,
    Price,
    RemoteAgentModel,
    SessionHeader,
    SessionStore,
    Spend,
)
from ..errors import BudgetError, ErrorCode
from ..ground import implements
from ..models import price_for

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("Spending", "open_spending", "priced")


class Spending:
    """What an agent spends under: its chain of accounts (outermost holder first)."""

    __slots__ = ("accounts", "chain", "counts_input", "own", "price", "session_id")

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

    def need(self, input_tokens: int, output_room: int | None) -> tuple[Spend, int | None]:
        """What a request with ``input_tokens`` in needs, and the most it may answer: the
        turn's own room (``output_room``) within what every output and cost limit leaves."""
        price = self.price
        room = output_room
        for account in self.chain:
            budget = account.budget
            if budget.output_tokens is not None:
                left = budget.output_tokens - int(account.used("output_tokens"))
                room = left if room is None else min(room, left)
            if budget.cost is not None and price is not None and price.output > 0:
                left_cost = budget.cost - account.used("cost") - price.bound(input_tokens, 0)
                left = int(left_cost * 1_000_000 / price.output)
                room = left if room is None else min(room, left)
        output = 0 if room is None else max(room, 1)
        cost = 0.0
        if price is not None and any(a.budget.cost is not None for a in self.chain):
            cost = price.bound(input_tokens, output)
        return Spend(input_tokens=input_tokens, output_tokens=output, cost=cost, requests=1), (
            None if room is None else output
        )

    def spent(self, response: ModelResponse) -> Spend:
        """What an answer spent."""
        return spend_of(response.usage, self.price, response.remote_usage)

    @property
    def deadline(self) -> tuple[float, Account] | None:
        """The first wall-clock deadline of the chain, and whose it is."""
        found: tuple[float, Account] | None = None
        for account in self.chain:
            deadline = account.deadline
            if deadline is not None and (found is None or deadline < found[0]):
                found = (deadline, account)
        return found

    def notices(self) -> list[Event]:
        """The notices (and their records) of the limits that passed their warning share."""
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
    accounts = Accounts.of(store)
    parent = header.parent_session
    ancestors: tuple[Account, ...] = ()
    if parent is not None:
        found = accounts.chains.get(parent)
        if found is None:
            runtime = agent.spec.runtime
            above = runtime.live_agents.get(parent) if runtime is not None else None
            if above is not None:  # open here, under no budget
                found = above.spending.chain if above.spending is not None else ()
        ancestors = found if found is not None else await _ancestors(accounts, store, header)
    wanted = agent.spec.budget
    events: list[Event] = []
    if record is None and not ancestors and wanted is None:
        return None, events
    price = priced(agent)

    def price_of(other: SessionHeader) -> Price | None:
        return _price_of(agent, other, price)

    if wanted is not None:
        current = read_descriptor(record) if record is not None else None
        if current is None or current[0] != wanted:
            started = time.time()
            base = Spend() if fresh else await count_tree(store, header.id, price_of, since=started)
            record = budget_descriptor(wanted, started, base)
            events.append(record)
    own: Account | None = None
    chain = ancestors
    if record is not None:
        budget, started, base = read_descriptor(record)
        new = fresh or bool(events)
        own = await accounts.open(header.id, budget, started, base, price_of, new=new)
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


def _price_of(agent: Agent, header: SessionHeader, price: Price | None) -> Price | None:
    """The price of another session of the tree (its header's model), for counting."""
    if header.id == agent.header.id:
        return price
    runtime = agent.spec.runtime
    return price_for(header.model, None, runtime.prices if runtime is not None else None)


async def _ancestors(
    accounts: Accounts, store: SessionStore, header: SessionHeader
) -> tuple[Account, ...]:
    """The accounts of the holders above ``header``'s session when its parent is not open in
    this process (a child another process started): read from the store, root first."""
    records: list[tuple[SessionHeader, DescriptorEvent]] = []
    parent = header.parent_session
    while parent is not None:
        above = await store.header(parent)
        record: DescriptorEvent | None = None
        for stored in await store.events(above.id):
            event = stored.event
            if isinstance(event, DescriptorEvent) and event.kind == BUDGET_DESCRIPTOR:
                record = event
        if record is not None:
            records.append((above, record))
        parent = above.parent_session
    chain: list[Account] = []
    for above, record in reversed(records):
        budget, started, base = read_descriptor(record)
        account = await accounts.open(above.id, budget, started, base, _header_price)
        account.users -= 1  # counted as a user by the agent that enters (open_spending)
        chain.append(account)
    return tuple(chain)


def _header_price(header: SessionHeader) -> Price | None:
    return price_for(header.model)


def child_budget(wanted: Budget | None, chain: Sequence[Account]) -> Budget | None:
    """The budget a delegated child gets: what it asked for (its delegation's, or its declared
    agent's), within what the chain above it has left; ``None`` when it asked for none."""
    if wanted is None:
        return None
    from ..budgets._accounts import remainder

    return wanted.within(remainder(chain))
