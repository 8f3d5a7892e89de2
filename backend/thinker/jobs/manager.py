"""(placeholder: being written)"""

from typing import Any

from sqlalchemy import func, select

from thinker.store import Job


class JobManager:
    def __init__(self, platform: Any) -> None:
        self.platform = platform
        self.gpus = 0

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def counts(self) -> dict[str, int]:
        async with self.platform.sessions() as session:
            rows = await session.execute(select(Job.state, func.count()).group_by(Job.state))
            return {state: n for state, n in rows.all()}
