"""The offline language model's dialogue: answers from knowledge passages, offers and books slots through the
calendar tools, calls a custom tool the caller names with arguments from what was said, transfers, ends the call,
and answers the after-call analysis in JSON, streamed like a real model."""

from __future__ import annotations

import json

from adapters.engines.offline import OfflineLanguageModel
from application.ports.engines import (
    ChatMessage,
    ChatRequest,
    Finished,
    LlmEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
)

OBJECT = {"type": "object", "properties": {}}
TOOLS = tuple(ToolSpec(name, name, OBJECT) for name in
              ("check_availability", "book_appointment", "transfer_call", "end_call"))
SYSTEM = ChatMessage("system", "You are the front desk of Dr. Smith's clinic.\n"
                               "It is now Friday, 2026-11-27, 09:00 (UTC).")
PASSAGES = ChatMessage("system", "Passages from the knowledge base that may answer the caller:\n"
                                 "[1] Dr. Smith has practised since 2004. The clinic is open from nine to five on "
                                 "weekdays.\n[2] Parking is free behind the building. We do not take walk-ins.")
SLOTS = {"ok": True, "timezone": "UTC", "slots": [
    {"start": "2026-11-28T09:00+00:00", "spoken": "Saturday at 9 AM"},
    {"start": "2026-11-28T10:00+00:00", "spoken": "Saturday at 10 AM"},
    {"start": "2026-11-28T14:30+00:00", "spoken": "Saturday at 2:30 PM"}]}


async def run(*messages: ChatMessage, tools: tuple[ToolSpec, ...] = TOOLS,
              json_answer: bool = False) -> list[LlmEvent]:
    request = ChatRequest("offline", [SYSTEM, *messages], tools=tools, response_format_json=json_answer)
    return [event async for event in OfflineLanguageModel().stream(request)]


def said(events: list[LlmEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls(events: list[LlmEvent]) -> tuple[ToolCall, ...]:
    return next((e.calls for e in events if isinstance(e, ToolCallRequest)), ())


def tool_turn(call: ToolCall, result: dict[str, object]) -> list[ChatMessage]:
    return [ChatMessage("assistant", tool_calls=(call,)),
            ChatMessage("tool", json.dumps(result), tool_call_id=call.id, name=call.name)]


async def test_a_question_is_answered_with_the_passage_sentence_sharing_most_words() -> None:
    events = await run(PASSAGES, ChatMessage("user", "Is there free parking near the building?"))
    assert said(events) == "Parking is free behind the building."
    assert len([e for e in events if isinstance(e, TextDelta)]) > 3  # streamed word by word
    assert events[-1] == Finished("stop")
    assert said(await run(PASSAGES, ChatMessage("user", "when are you open on weekdays"))) == (
        "The clinic is open from nine to five on weekdays.")


async def test_a_question_without_an_answer_in_the_passages_is_admitted() -> None:
    assert "don't know" in said(await run(PASSAGES, ChatMessage("user", "Do you sell bicycles?")))


async def test_booking_tomorrow_at_ten_checks_the_calendar_then_books_the_matching_slot() -> None:
    ask = ChatMessage("user", "I would like to book an appointment tomorrow at ten")
    first = await run(ask)
    [check] = calls(first)
    assert (check.name, check.arguments) == ("check_availability", {"date": "2026-11-28"})
    assert first[-1] == Finished("tool_calls") and said(first) == "Let me check the calendar."
    second = await run(ask, *tool_turn(check, SLOTS))
    [book] = calls(second)
    assert (book.name, book.arguments, book.id) == ("book_appointment", {"slot_start": "2026-11-28T10:00+00:00"},
                                                    "call_2")
    assert "Saturday at 10 AM" in said(second)
    third = await run(ask, *tool_turn(check, SLOTS), *tool_turn(book, {"ok": True, "booked": True,
                                                                        "spoken": "Saturday at 10 AM"}))
    assert said(third) == "You're booked for Saturday at 10 AM. Is there anything else I can help you with?"
    assert not calls(third)


async def test_offered_slots_are_booked_when_the_caller_says_yes_or_a_time() -> None:
    ask = ChatMessage("user", "Can I book an appointment?")
    [check] = calls(await run(ask))
    assert check.arguments == {}
    offer = await run(ask, *tool_turn(check, SLOTS))
    assert said(offer) == "I have Saturday at 9 AM, Saturday at 10 AM or Saturday at 2:30 PM. Which would you like?"
    history = [ask, *tool_turn(check, SLOTS), ChatMessage("assistant", said(offer))]
    [yes] = calls(await run(*history, ChatMessage("user", "yes please")))
    assert yes.arguments == {"slot_start": "2026-11-28T09:00+00:00"}
    [half_past] = calls(await run(*history, ChatMessage("user", "two thirty works")))
    assert half_past.arguments == {"slot_start": "2026-11-28T14:30+00:00"}
    [digits] = calls(await run(*history, ChatMessage("user", "2:30 pm")))
    assert digits.arguments == {"slot_start": "2026-11-28T14:30+00:00"}


async def test_a_taken_time_is_told_with_the_open_ones() -> None:
    ask = ChatMessage("user", "book me tomorrow at 4 pm")
    [check] = calls(await run(ask))
    answer = said(await run(ask, *tool_turn(check, SLOTS)))
    assert answer.startswith("That time is taken. I have Saturday at 9 AM")


async def test_a_failed_tool_is_told_to_the_caller() -> None:
    ask = ChatMessage("user", "book tomorrow at ten")
    call = ToolCall("call_1", "check_availability", {"date": "2026-11-28"})
    answer = said(await run(ask, *tool_turn(call, {"ok": False, "error": "this agent has no calendar"})))
    assert "didn't work: this agent has no calendar" in answer


WEATHER = ToolSpec("weather_forecast", "The weather forecast of a city", {
    "type": "object", "required": ["city"],
    "properties": {"city": {"type": "string", "enum": ["paris", "new york"]}, "days": {"type": "integer"},
                   "date": {"type": "string", "format": "date"}, "unit": {"type": "string"}}})


async def test_a_custom_tool_the_caller_names_is_called_with_arguments_from_what_was_said() -> None:
    events = await run(ChatMessage("user", "what is the weather in new york tomorrow for three days"),
                       tools=(*TOOLS, WEATHER))
    assert said(events) == "One moment, let me look that up."
    (call,) = calls(events)
    assert (call.name, call.arguments) == ("weather_forecast", {"city": "new york", "days": 3,
                                                                "date": "2026-11-28"})
    answered = await run(ChatMessage("user", "what is the weather in new york"),
                         *tool_turn(call, {"ok": True, "result": {"forecast": "sunny", "high": 21}}),
                         tools=(*TOOLS, WEATHER))
    assert said(answered) == "Here is what I found: forecast sunny, high 21."
    assert calls(await run(ChatMessage("user", "what is the weather"), tools=TOOLS)) == ()  # not offered: no call


async def test_transfer_and_goodbye_call_their_tools_after_saying_so() -> None:
    human = await run(ChatMessage("user", "can I speak to a human"))
    assert said(human) == "Let me transfer you to a colleague." and calls(human)[0].name == "transfer_call"
    bye = await run(ChatMessage("user", "that's all, goodbye"))
    assert said(bye) == "Thank you for calling. Goodbye!" and calls(bye)[0].name == "end_call"
    after = await run(ChatMessage("user", "bye"), *tool_turn(calls(bye)[0], {"ok": True, "ending": True}))
    assert after == [Finished("stop")]


async def test_without_the_tools_it_says_what_it_cannot_do() -> None:
    assert "can't transfer" in said(await run(ChatMessage("user", "transfer me"), tools=()))
    assert "can't book" in said(await run(ChatMessage("user", "book an appointment"), tools=()))
    assert calls(await run(ChatMessage("user", "goodbye"), tools=())) == ()


async def test_the_same_conversation_gets_the_same_answer() -> None:
    first = await run(PASSAGES, ChatMessage("user", "Who is Dr. Smith?"))
    assert first == await run(PASSAGES, ChatMessage("user", "Who is Dr. Smith?"))


async def test_the_after_call_analysis_is_a_json_object_following_the_schema() -> None:
    schema = {"type": "object", "required": ["booked", "reason"],
              "properties": {"booked": {"type": "boolean"}, "reason": {"type": "string", "enum": ["new", "other"]}}}
    events = await run(
        ChatMessage("system", "Answer with JSON. data must follow this JSON Schema: " + json.dumps(schema)),
        ChatMessage("user", "The call:\nAgent: Hello!\nCaller: book tomorrow\n"
                            "Agent: You're booked for Saturday at 10 AM."), json_answer=True)
    answer = json.loads(said(events))
    assert answer == {"summary": "The caller spoke 1 time; an appointment was booked.", "successful": True,
                      "data": {"booked": False, "reason": "new"}}


async def test_asked_what_the_call_is_about_it_says_the_prompts_first_sentence_and_thanked_it_is_welcome() -> None:
    prompt = ChatMessage("system", "You call Ada about her order. Be brief.\n\nYou are speaking on a phone call.")
    asked = ChatRequest("offline", [prompt, ChatMessage("user", "Hi, this is Ada. What is this call about?")])
    assert said([e async for e in OfflineLanguageModel().stream(asked)]) == (
        "I'm calling about the following: You call Ada about her order.")
    assert said(await run(ChatMessage("user", "Okay. That's all I needed, thank you."))) == (
        "You're welcome. Have a nice day!")
    assert not calls(await run(ChatMessage("user", "Thanks!")))
    thanks_bye = await run(ChatMessage("user", "Thank you, goodbye."))
    assert [c.name for c in calls(thanks_bye)] == ["end_call"]  # a goodbye still ends the call
    unknown = await run(ChatMessage("user", "Thanks, but what is the weather?"))
    assert said(unknown).startswith("I'm sorry, I don't know that.")
