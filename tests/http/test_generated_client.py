"""The served OpenAPI document, as a generated client sees it: openapi-python-client generates a package from it
without a single warning, and that package drives a flow against the running app (an agent published, a call
placed and read back, contacts uploaded to a campaign through the generated multipart method, telephony
statistics read). Generation is local: nothing reaches the internet."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.apps import Api

pytestmark = pytest.mark.slow

PACKAGE = "parley_generated_client"
# a recording download is audio/wav and an invoice's PDF application/pdf: the generator reads them as bytes when
# told so (the one option it needs)
CONFIG = ("content_type_overrides:\n  audio/wav: application/octet-stream\n"
          "  application/pdf: application/octet-stream\npost_hooks: []\n")


def _generate(document: bytes, where: Path) -> Any:
    (where / "openapi.json").write_bytes(document)
    (where / "config.yaml").write_text(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(where / "openapi.json"),
         "--meta", "none", "--output-path", str(where / PACKAGE), "--config", str(where / "config.yaml")],
        capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert not [line for line in output.splitlines() if line.strip() and not line.startswith("Generating ")], output
    sys.path.insert(0, str(where))
    try:
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))


async def test_a_generated_client_drives_a_flow_without_warnings(api: Api, tmp_path: Path) -> None:
    document = await api.client.get("/v2/openapi.json")
    assert document.status_code == 200
    _generate(document.content, tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        client_module = importlib.import_module(f"{PACKAGE}.client")
        agents = importlib.import_module(f"{PACKAGE}.api.agents")
        calls = importlib.import_module(f"{PACKAGE}.api.calls")
        campaigns = importlib.import_module(f"{PACKAGE}.api.campaigns")
        telephony = importlib.import_module(f"{PACKAGE}.api.telephony")
        models = importlib.import_module(f"{PACKAGE}.models")
        types = importlib.import_module(f"{PACKAGE}.types")
        for name in ("create_agent", "publish_agent"):
            importlib.import_module(f"{agents.__name__}.{name}")
        for name in ("create_call", "get_call"):
            importlib.import_module(f"{calls.__name__}.{name}")
        for name in ("create_campaign", "import_campaign_contacts", "list_campaign_contacts"):
            importlib.import_module(f"{campaigns.__name__}.{name}")
        importlib.import_module(f"{telephony.__name__}.get_telephony_stats")
    finally:
        sys.path.remove(str(tmp_path))

    t = await api.tenant()
    transport = httpx.ASGITransport(app=api.client.app)
    http = httpx.AsyncClient(transport=transport, base_url="http://testserver/v2",
                             headers={"Authorization": f"Bearer {t.key}"})
    client = client_module.AuthenticatedClient(base_url="http://testserver/v2", token=t.key)
    client.set_async_httpx_client(http)
    async with http:
        agent = (await agents.create_agent.asyncio(client=client, body=models.AgentCreate(name="Generated"))).data
        assert isinstance(agent, models.AgentOut) and agent.name == "Generated"
        published = await agents.publish_agent.asyncio(agent.id, client=client)
        assert isinstance(published, models.EnvelopePublishResult), published

        placed = await calls.create_call.asyncio(
            client=client, body=models.CallCreate(bot_id=agent.id, destination_phone="+1555010000"))
        assert isinstance(placed, models.EnvelopeCallOut), placed
        read = await calls.get_call.asyncio(placed.data.id, client=client)
        assert isinstance(read, models.EnvelopeCallOut) and read.data.id == placed.data.id

        campaign = await campaigns.create_campaign.asyncio(
            client=client, body=models.CampaignCreate(name="Generated", agent_id=agent.id))
        assert isinstance(campaign, models.EnvelopeCampaignOut), campaign
        csv = b"phone,name\n+14155550124,Ada\n+14155550125,Grace\n"
        upload = models.CsvUpload(file=types.File(payload=io.BytesIO(csv), file_name="contacts.csv",
                                                  mime_type="text/csv"))
        added = await campaigns.import_campaign_contacts.asyncio(campaign.data.id, client=client, body=upload)
        assert isinstance(added, models.EnvelopeContactsAdded), added
        contacts = await campaigns.list_campaign_contacts.asyncio(campaign.data.id, client=client)
        assert sorted(c.phone for c in contacts.data) == ["+14155550124", "+14155550125"]

        now = datetime.now(UTC)
        stats = await telephony.get_telephony_stats.asyncio(client=client, start=now - timedelta(days=1),
                                                            end=now + timedelta(minutes=1))
        assert isinstance(stats, models.EnvelopeCallStatsOut), stats
        assert stats.data.total_calls >= 1
