"""An operator runs job kinds in worker processes of their own (`parley worker --jobs` / `--exclude-jobs`): the
runner has only the selected kinds, so the queue hands it no other job; a name that is not a job kind, or a
selection that leaves none, is refused with the known kinds named."""

from __future__ import annotations

import pytest

from entrypoints.features.calls import KIND as CALLS
from entrypoints.features.campaigns import KIND as DIALER
from entrypoints.ioc import build_container
from entrypoints.worker import JobSelection, JobSelectionError, jobs, make_runner
from tests.conftest import Api


async def test_a_worker_runs_the_job_kinds_it_is_given(api: Api) -> None:
    container = build_container(api.settings, *api.overrides)
    try:
        every = {make(container, api.settings).name for make in jobs()}
        assert {DIALER, CALLS} <= every
        only = await make_runner(container, api.settings, selection=JobSelection(frozenset({DIALER})))
        assert set(only.kinds) == {DIALER}
        rest = await make_runner(container, api.settings, selection=JobSelection(exclude=frozenset({CALLS})))
        assert set(rest.kinds) == every - {CALLS}
        assert set((await make_runner(container, api.settings)).kinds) == every
        with pytest.raises(JobSelectionError, match=f"unknown job kind calls.dial .*{CALLS}"):
            await make_runner(container, api.settings, selection=JobSelection(frozenset({DIALER, "calls.dial"})))
        with pytest.raises(JobSelectionError, match="no job kind left"):
            await make_runner(container, api.settings,
                              selection=JobSelection(frozenset({DIALER}), frozenset({DIALER})))
    finally:
        await container.close()
