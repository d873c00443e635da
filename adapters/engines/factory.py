"""The :class:`application.ports.engines.EngineFactory`: the engines of one conversation from its resolved
settings (``EngineChoice``: the provider's type, base URL and opened key, and the agent's options)."""

from __future__ import annotations

from adapters.engines.offline import (
    EspeakTextToSpeech,
    OfflineLanguageModel,
    PocketsphinxSpeechToText,
    WebRtcTurnDetectors,
)
from adapters.engines.openai_compatible import (
    OpenAiEndpoint,
    OpenAiLanguageModel,
    OpenAiSpeechToText,
    OpenAiTextToSpeech,
)
from application.ports.egress import SafeHttp
from application.ports.engines import (
    EngineChoice,
    EngineError,
    Engines,
    LanguageModel,
    SpeechToText,
    TextToSpeech,
    TurnDetectors,
)


class EngineBuilder:
    """Builds engines per conversation (they are cheap: the offline recognizer's models are shared per
    vocabulary, and an OpenAI-compatible engine is its endpoint). End of turn is always detected here, on the
    caller's audio, with WebRTC's voice activity detector."""

    def __init__(self, http: SafeHttp, *, connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 turns: TurnDetectors | None = None) -> None:
        self.http = http
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.turns = turns or WebRtcTurnDetectors()

    def _endpoint(self, choice: EngineChoice) -> OpenAiEndpoint:
        if not choice.base_url:
            raise EngineError("an openai_compatible provider needs a base_url")
        return OpenAiEndpoint(choice.base_url, choice.api_key, connect_timeout=self.connect_timeout,
                              read_timeout=self.read_timeout)

    def llm(self, choice: EngineChoice) -> LanguageModel:
        if choice.provider_type == "openai_compatible":
            return OpenAiLanguageModel(self.http, self._endpoint(choice))
        return OfflineLanguageModel()

    def stt(self, choice: EngineChoice) -> SpeechToText:
        if choice.provider_type == "openai_compatible":
            return OpenAiSpeechToText(self.http, self._endpoint(choice), model=choice.model, language=choice.language)
        return PocketsphinxSpeechToText(choice.vocabulary)

    def tts(self, choice: EngineChoice) -> TextToSpeech:
        if choice.provider_type == "openai_compatible":
            return OpenAiTextToSpeech(self.http, self._endpoint(choice), model=choice.model)
        return EspeakTextToSpeech(language=choice.language)

    def build(self, *, llm: EngineChoice, voice: EngineChoice, transcriber: EngineChoice) -> Engines:
        return Engines(stt=self.stt(transcriber), llm=self.llm(llm), tts=self.tts(voice), turns=self.turns)
