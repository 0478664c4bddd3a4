"""Keeping a process's sessions: renew their leases, deliver the mail other processes post,
share the budgets another process spends under too.

Only a durable store is shared with other processes, and one keeper per process and store is
enough: the runtime's (inside ``Runtime.open``), else the root agent's (an agent whose parent is
not open in the process).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import anyio

from ..budgets._accounts import POLL_EVERY as BUDGET_POLL
from ..budgets._accounts import Accounts
from ..errors import TetherError
from ..store import SessionStore

__all__ = ("LEASE_RENEWAL", "MAIL_POLL", "keep_sessions")

log = logging.getLogger("tether.agents")

#: How often the keeper of a process's sessions looks for posted mail, in seconds.
MAIL_POLL = 0.05
#: How often it renews the leases of the process's sessions, in seconds.
LEASE_RENEWAL = 10.0


async def keep_sessions(store: SessionStore, deliver: Callable[[str], Awaitable[None]]) -> None:
    """Until cancelled: about every ``MAIL_POLL`` seconds hand each session with posted mail to
    ``deliver(session_id)``; every ``LEASE_RENEWAL`` seconds renew the store's leases. A store
    that is busy or refuses is logged, and looked at again next time (mail waits in it)."""
    renewed = polled = anyio.current_time()
    while True:
        # Jittered: a fixed period can stay in step with another task's timer (anyio's
        # wait_all_tasks_blocked polls every 0.1 s) and look busy at every one of its looks.
        await anyio.sleep(MAIL_POLL * (0.75 + random.random() * 0.5))
        try:
            if anyio.current_time() - renewed >= LEASE_RENEWAL:
                await store.renew()
                renewed = anyio.current_time()
            for session_id in await store.mail():
                await deliver(session_id)
            if anyio.current_time() - polled >= BUDGET_POLL:
                # A budget this process counts in memory that another process now spends
                # under too is handed to the store's ledger (docs/budgets.md).
                polled = anyio.current_time()
                accounts = Accounts.find(store)
                if accounts is not None and accounts.exclusive_shared:
                    await accounts.poll()
        except TetherError as exc:
            log.warning("could not look for mail: %s", exc)
