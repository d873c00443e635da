"""An operator runs work in worker processes of its own (`parley worker --jobs` / `--exclude-jobs`, by job kind
or resident name): the runner has only the selected kinds, so the queue hands it no other job; a name that is
not known, or a selection that leaves nothing, is refused with the known names."""

from __future__ import annotations

import pytest

from application.call_progress import KIND as CALLS
from application.dialer_pass import KIND as DIALER
from application.webhook_delivery import DELIVER as DELIVERY
from entrypoints.ioc import build_container
from entrypoints.worker import JobSelection, JobSelectionError, make_runner, selected_work
from tests.support.apps import Api


async def test_a_worker_runs_the_work_it_is_given(api: Api) -> None:
    container = build_container(api.settings, *api.overrides)
    try:
        kinds, residents = selected_work(container, api.settings)
        every = {kind.name for kind in kinds}
        assert {DIALER, CALLS} <= every and set(residents) == {DELIVERY}

        kinds, residents = selected_work(container, api.settings, JobSelection(frozenset({DIALER})))
        assert [kind.name for kind in kinds] == [DIALER] and residents == {}
        runner = await make_runner(container, api.settings, kinds=kinds)
        assert set(runner.kinds) == {DIALER}  # it claims campaigns.dial jobs only

        kinds, residents = selected_work(container, api.settings, JobSelection(exclude=frozenset({CALLS})))
        assert {kind.name for kind in kinds} == every - {CALLS} and set(residents) == {DELIVERY}

        kinds, residents = selected_work(container, api.settings, JobSelection(frozenset({DELIVERY})))
        assert kinds == [] and set(residents) == {DELIVERY}

        with pytest.raises(JobSelectionError, match=f"unknown job kind calls.dial .*{CALLS}.*{DELIVERY}"):
            selected_work(container, api.settings, JobSelection(frozenset({DIALER, "calls.dial"})))
        with pytest.raises(JobSelectionError, match="no job kind left"):
            selected_work(container, api.settings, JobSelection(frozenset({DIALER}), frozenset({DIALER})))
    finally:
        await container.close()
