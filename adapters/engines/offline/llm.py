"""A deterministic language model for the ``offline`` provider: no network, no weights, the same answer to the same
conversation every time. It reads the conversation as a real model would (OpenAI-shaped messages, the tools it is
offered) and answers the way a real model does (text deltas, or a tool-call request and then, once the tool
results are in, an answer in words):

- a question is answered from the knowledge passages in the system messages (the sentence sharing the most words
  with the question);
- a wish to book (``book``, ``appointment``, a time) calls ``check_availability``; its slots are offered,
  and a time, "book" or "yes" books one with ``book_appointment``;
- "human", "agent", "transfer" call ``transfer_call``; "bye", "goodbye" call ``end_call``;
- asked what the call is about, it says the first sentence of the agent's prompt; thanked, it says you're welcome;
- a custom tool whose name's words the caller says (``order_status``: "the status of my order") is called, its
  arguments taken from what was said (an ``enum`` value said, a number, a day for a ``date``), and its result read
  out;
- asked for JSON (the after-call analysis), it answers ``{summary, successful, data}``.

The first message is the runtime's to say; this model answers the caller's turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from application.ports.engines import (
    ChatMessage,
    ChatRequest,
    Finished,
    LlmEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
)

CHECK_AVAILABILITY = "check_availability"
BOOK_APPOINTMENT = "book_appointment"
TRANSFER_CALL = "transfer_call"
END_CALL = "end_call"

GREETING = "Hello! How can I help you today?"
DONT_KNOW = "I'm sorry, I don't know that. Is there anything else I can help you with?"
GOODBYE = "Thank you for calling. Goodbye!"
TRANSFERRING = "Let me transfer you to a colleague."
NO_TRANSFER = "I'm sorry, I can't transfer calls. Can I help you with something else?"
NO_BOOKING = "I'm sorry, I can't book appointments on this call. Can I help you with something else?"
CHECKING = "Let me check the calendar."
WELCOME = "You're welcome. Have a nice day!"
PURPOSE = "I'm calling about the following: {sentence}"
ONE_MOMENT = "One moment, let me look that up."
BUILT_IN = frozenset({CHECK_AVAILABILITY, BOOK_APPOINTMENT, TRANSFER_CALL, END_CALL, "send_sms"})

_WORD = re.compile(r"[a-z0-9']+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_PASSAGE = re.compile(r"^\s*\[\d+\]\s*(.+)$")
_TODAY = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?![\d-])")

_STOPWORDS = """a an the and or but if of at by for with about to from in on is are was were be been am do does
did doing have has had i me my we our you your he she it its they them their this that these those what which who whom
whose when where why how can could would should will shall may might must please tell know like want just there here
so too very also any some no not yes hi hello hey okay ok um uh oh well into than then as up down out over"""
STOPWORDS = frozenset(_STOPWORDS.split())

_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12, "noon": 12}
_MINUTES = {"fifteen": 15, "thirty": 30, "forty": 45, "half": 30, "quarter": 15}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_BOOKING_WORDS = frozenset({"book", "booking", "appointment", "appointments", "schedule", "reserve", "availability",
                            "slot", "slots"})
_YES = frozenset({"yes", "yeah", "yep", "sure", "okay", "ok", "fine", "perfect", "great", "works", "book"})
_TRANSFER_WORDS = frozenset({"human", "agent", "transfer", "person", "representative", "operator", "someone"})
_BYE_WORDS = frozenset({"bye", "goodbye"})
_THANKS_WORDS = frozenset({"thank", "thanks"})
_PURPOSE = re.compile(r"\bwhat(?:'s| is) (?:this|the) call about\b|\bwhy are you calling\b|\bwhat is this about\b")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in words(text) if w not in STOPWORDS}


def passages_of(messages: Sequence[ChatMessage]) -> list[str]:
    """The knowledge passages given in system messages: ``[n] text`` lines; without any, the system messages after
    the first (the first is the agent's prompt)."""
    systems = [m.content for m in messages if m.role == "system"]
    numbered = [match.group(1) for text in systems for line in text.splitlines() if (match := _PASSAGE.match(line))]
    return numbered or systems[1:]


def prompt_sentence(messages: Sequence[ChatMessage]) -> str | None:
    """The first sentence of the agent's prompt (the first system message, up to its first blank line)."""
    system = next((m.content for m in messages if m.role == "system"), "")
    prompt = " ".join(system.split("\n\n", 1)[0].split())
    if not prompt:
        return None
    sentence = _SENTENCE.split(prompt, maxsplit=1)[0]
    return sentence if len(sentence) <= 240 else sentence[:237].rstrip() + "..."


def best_sentence(question: str, passages: Sequence[str]) -> str | None:
    """The passage sentence sharing the most content words with ``question`` (the first of equals); None when no
    sentence shares any."""
    asked = content_words(question)
    best, best_score = None, 0
    for passage in passages:
        for sentence in _SENTENCE.split(" ".join(passage.split())):
            score = len(asked & content_words(sentence))
            if score > best_score:
                best, best_score = sentence.strip(), score
    return best


def today_of(messages: Sequence[ChatMessage]) -> date | None:
    """The date the system message gives (``It is now Friday, 2026-11-27, ...``)."""
    for message in messages:
        if message.role == "system":
            found = _TODAY.search(message.content)
            if found:
                try:
                    return date.fromisoformat(found.group(1))
                except ValueError:
                    continue
    return None


def asked_day(text: str, today: date | None) -> date | None:
    said = words(text)
    found = _TODAY.search(text)
    if found:
        try:
            return date.fromisoformat(found.group(1))
        except ValueError:
            pass
    if today is None:
        return None
    if "today" in said:
        return today
    if "tomorrow" in said:
        return today + timedelta(days=1)
    for index, name in enumerate(_WEEKDAYS):
        if name in said:
            return today + timedelta(days=(index - today.weekday() - 1) % 7 + 1)
    return None


def asked_time(text: str) -> tuple[int, int | None] | None:
    """(hour 0-23 or 1-12 when the part of the day is not said, minute or None) of a time the caller said."""
    lowered = text.lower()
    for match in _CLOCK.finditer(lowered):
        hour, minute, part = int(match.group(1)), match.group(2), match.group(3)
        if not 0 <= hour <= 23 or (part is None and minute is None and not re.search(
                rf"\bat\s+{match.group(1)}\b|\b{match.group(1)}\s*o'?clock", lowered)):
            continue
        if part and part.startswith("p") and hour < 12:
            hour += 12
        return hour, int(minute) if minute else None
    said = words(text)
    for index, word in enumerate(said):
        if word in _NUMBERS:
            hour = _NUMBERS[word]
            rest = said[index + 1:index + 3]
            minute = next((_MINUTES[w] for w in rest if w in _MINUTES), None)
            if "pm" in rest or "evening" in rest or "afternoon" in rest:
                hour = hour + 12 if hour < 12 else hour
            return hour, minute
    return None


def _slot_time(slot: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(slot.get("start")))
    except ValueError:
        return None


def matching_slot(slots: Sequence[dict[str, Any]], time: tuple[int, int | None]) -> dict[str, Any] | None:
    hour, minute = time
    for slot in slots:
        start = _slot_time(slot)
        if start is None:
            continue
        same_hour = start.hour == hour if hour > 12 else start.hour % 12 == hour % 12
        if same_hour and (minute is None or start.minute == minute):
            return slot
    return None


def _tool_result(message: ChatMessage) -> dict[str, Any]:
    try:
        found = json.loads(message.content)
    except ValueError:
        return {"ok": False, "error": message.content}
    return found if isinstance(found, dict) else {"ok": True, "result": found}


def _spoken(slot: dict[str, Any]) -> str:
    return str(slot.get("spoken") or slot.get("start"))


class OfflineLanguageModel:
    """:class:`application.ports.engines.LanguageModel`, deterministic and offline (see the module)."""

    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        if request.response_format_json:
            for event in self._say(json.dumps(analysis(request.messages), separators=(",", ":"))):
                yield event
            return
        text, calls = self.answer(request)
        for event in self._say(text):
            yield event
        if calls:
            yield ToolCallRequest(tuple(calls))
            yield Finished("tool_calls")
            return
        yield Finished("stop")

    @staticmethod
    def _say(text: str) -> list[LlmEvent]:
        return [TextDelta(piece) for piece in re.findall(r"\S+\s*", text)]

    def answer(self, request: ChatRequest) -> tuple[str, list[ToolCall]]:
        messages = list(request.messages)
        offered = {tool.name for tool in request.tools}
        number = 1 + sum(len(m.tool_calls) for m in messages if m.role == "assistant")

        def call(name: str, arguments: dict[str, Any] | None = None) -> ToolCall:
            return ToolCall(f"call_{number}", name, arguments or {})

        users = [i for i, m in enumerate(messages) if m.role == "user"]
        if not users:
            return GREETING, []
        last_user = users[-1]
        said = messages[last_user].content
        results = [m for m in messages[last_user + 1:] if m.role == "tool"]
        if results:
            return self._after_tools(results, said, offered, call)
        said_words = set(words(said))
        if said_words & _BYE_WORDS:
            return (GOODBYE, [call(END_CALL)]) if END_CALL in offered else (GOODBYE, [])
        if said_words & _TRANSFER_WORDS:
            return (TRANSFERRING, [call(TRANSFER_CALL)]) if TRANSFER_CALL in offered else (NO_TRANSFER, [])
        today = today_of(messages)
        custom = custom_tool(request.tools, said)
        if custom is not None:
            return ONE_MOMENT, [call(custom.name, tool_arguments(custom.parameters, said, today))]
        slots = self._offered_slots(messages[:last_user])
        time = asked_time(said)
        day = asked_day(said, today)
        if slots and BOOK_APPOINTMENT in offered and day is None:
            chosen = matching_slot(slots, time) if time else (slots[0] if said_words & _YES else None)
            if chosen is not None:
                return f"I'll book {_spoken(chosen)} for you.", [call(BOOK_APPOINTMENT,
                                                                      {"slot_start": chosen["start"]})]
        wants_booking = bool(said_words & _BOOKING_WORDS) or time is not None
        if wants_booking and CHECK_AVAILABILITY in offered:
            arguments = {"date": day.isoformat()} if day else {}
            return CHECKING, [call(CHECK_AVAILABILITY, arguments)]
        if _PURPOSE.search(said.lower()):
            purpose = prompt_sentence(messages)
            if purpose:
                return PURPOSE.format(sentence=purpose), []
        sentence = best_sentence(said, passages_of(messages))
        if sentence:
            return sentence, []
        if said_words & _BOOKING_WORDS:
            return NO_BOOKING, []
        if said_words & _THANKS_WORDS and "?" not in said:
            return WELCOME, []
        return DONT_KNOW, []

    @staticmethod
    def _offered_slots(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        """The slots of the latest availability result, unless something was booked since."""
        for message in reversed(messages):
            if message.role == "tool" and message.name == BOOK_APPOINTMENT and _tool_result(message).get("ok"):
                return []
            if message.role == "tool" and message.name == CHECK_AVAILABILITY:
                slots = _tool_result(message).get("slots")
                return [s for s in slots if isinstance(s, dict)] if isinstance(slots, list) else []
        return []

    def _after_tools(self, results: Sequence[ChatMessage], said: str, offered: set[str],
                     call: Any) -> tuple[str, list[ToolCall]]:
        last = results[-1]
        result = _tool_result(last)
        name = last.name or ""
        if not result.get("ok", True):
            why = result.get("error") or "it did not work"
            return f"I'm sorry, that didn't work: {why}. Can I help you with something else?", []
        if name == CHECK_AVAILABILITY:
            slots = [s for s in result.get("slots") or [] if isinstance(s, dict)]
            if not slots:
                return "I'm sorry, there are no open slots then. Would another day suit you?", []
            time = asked_time(said)
            chosen = matching_slot(slots, time) if time else None
            if chosen is not None and BOOK_APPOINTMENT in offered:
                return f"{_spoken(chosen)} is free. I'll book it for you.", [call(BOOK_APPOINTMENT,
                                                                                 {"slot_start": chosen["start"]})]
            choices = [_spoken(s) for s in slots[:3]]
            listed = choices[0] if len(choices) == 1 else ", ".join(choices[:-1]) + " or " + choices[-1]
            lead = "That time is taken. " if time else ""
            return f"{lead}I have {listed}. Which would you like?", []
        if name == BOOK_APPOINTMENT:
            when = result.get("spoken") or "that time"
            return f"You're booked for {when}. Is there anything else I can help you with?", []
        if name in (END_CALL, TRANSFER_CALL):
            return "", []
        details = {k: v for k, v in result.items() if k != "ok"}
        found = details.get("result", details) if set(details) <= {"result"} else details
        return f"Here is what I found: {spoken_result(found)}.", []


def _name_words(name: str) -> set[str]:
    return {_stem(w) for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower())
            if w and w not in STOPWORDS}


def custom_tool(tools: Sequence[Any], said: str) -> Any | None:
    """The offered custom tool (not a built-in) whose name shares the most words with what was said (at least one;
    the first of equals)."""
    asked = content_words(said)
    best, best_score = None, 0
    for tool in tools:
        if tool.name in BUILT_IN:
            continue
        score = len(asked & _name_words(tool.name))
        if score > best_score:
            best, best_score = tool, score
    return best


def _number(said: str) -> int | None:
    digits = re.search(r"\b\d+\b", said)
    if digits:
        return int(digits.group(0))
    return next((_NUMBERS[w] for w in words(said) if w in _NUMBERS and w != "noon"), None)


def tool_arguments(parameters: dict[str, Any], said: str, today: date | None) -> dict[str, Any]:
    """A custom tool's arguments from what the caller said: for each property, an ``enum`` value said, a number
    for an ``integer`` or ``number``, a day for a ``date`` string, and what was said for another required
    string; a property nothing fits is left out."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = set(parameters.get("required") or [])
    said_words = words(said)
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        if not isinstance(schema, dict):
            continue
        kind = schema.get("type")
        enum = schema.get("enum")
        if isinstance(enum, list):
            chosen = next((v for v in enum if isinstance(v, str) and words(v)
                           and all(w in said_words for w in words(v))), None)
            if chosen is not None:
                arguments[name] = chosen
        elif kind in ("integer", "number"):
            number = _number(said)
            if number is not None:
                arguments[name] = number
        elif kind == "string" and (schema.get("format") == "date" or "date" in name or "day" in name):
            day = asked_day(said, today)
            if day is not None:
                arguments[name] = day.isoformat()
        elif kind == "string" and name in required:
            arguments[name] = said
    return arguments


def spoken_result(found: Any) -> str:
    """A tool's result as words: an object's fields as "name value", a list's items, a plain value as it is."""
    if isinstance(found, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {spoken_result(v)}" for k, v in found.items()) or "nothing"
    if isinstance(found, list):
        return ", ".join(spoken_result(v) for v in found) or "nothing"
    if found is None:
        return "nothing"
    return str(found)


def _fill(schema: Any) -> Any:
    """A value of the schema's type for each required property (what the offline model can say about a call)."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    if kind == "object":
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        return {name: _fill(properties.get(name, {})) for name in schema.get("required") or [] if isinstance(name, str)}
    return {"string": "", "boolean": False, "integer": 0, "number": 0, "array": []}.get(str(kind))


def analysis(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """``{summary, successful, data}`` from the call's text the analysis request carries: successful when something
    was booked, or every caller question had an answer."""
    text = "\n".join(m.content for m in messages if m.role == "user")
    caller = [line for line in text.splitlines() if line.startswith("Caller:")]
    agent = [line for line in text.splitlines() if line.startswith("Agent:")]
    booked = any("booked for" in line for line in agent)
    unanswered = any(DONT_KNOW in line for line in agent)
    summary = (f"The caller spoke {len(caller)} time{'s' if len(caller) != 1 else ''}"
               + ("; an appointment was booked." if booked else "."))
    schema: Any = None
    for message in messages:
        if message.role == "system" and "JSON Schema:" in message.content:
            try:
                schema = json.loads(message.content.split("JSON Schema:", 1)[1].strip())
            except ValueError:
                schema = None
    data = _fill(schema) if isinstance(schema, dict) else {}
    return {"summary": summary, "successful": booked or (bool(caller) and not unanswered),
            "data": data if isinstance(data, dict) else {}}
