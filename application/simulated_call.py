"""The telephony simulator's calls run the one conversation: :class:`AgentConversation` with a scripted text caller.

Plan (one conversation path, not two). The simulator used to write each call's transcript itself
(``adapters/telephony/conversation.py``) and asked the calls' pass for one tool, the booking. Now:

1. The simulator (``adapters/telephony/simulator.py``) keeps what a carrier knows: from the test number, when the
   line rings, answers, is busy, fails or reaches a voicemail box, and the call's wall-clock pacing. When a line is
   up it reports a ``conversation`` signal carrying a :class:`~application.ports.telephony.ScriptedCaller` (what
   the caller will say, in order; a voicemail box says nothing) and waits, as it waited for a tool, until it is
   handed the conversation's outcome (``Telephony.resume(handle, "conversation", result)``); it then reports the
   end at the answer plus the conversation's length, with its transcript, and writes the recording.
2. ``AdvanceCall`` records ``call.answered`` and returns the request (``Advanced.conversation``); the calls' pass
   (``application/call_progress.py``) runs the conversation outside any unit of work (its tools, knowledge
   searches and configuration each take a unit of their own, as on a live media session, so nothing holds the
   call's row or SQLite's writer while the model thinks), then ``ResumeCall`` hands the outcome back in a unit of
   its own. ``appointment.booked`` is recorded by the booking tool's own unit: after ``call.answered``, before
   ``call.ended``. The simulator's own mid-call booking (``AppointmentBooker``) is gone.
3. This module runs it: :class:`SimulatedConversations` builds :class:`AgentConversation` (the runtime of live
   media sessions) on a :class:`TextCallerSession`, a :class:`~application.ports.media.MediaSession` on virtual
   time whose caller speaks text; engines that pass text through (the recognizer reads the words the frame
   carries, the voice is silence as long as the words take to say, the end of turn is the caller's scripted
   pause) and the agent's own language model (the ``offline`` one unless its AI provider names another). Greeting,
   knowledge answers, booking tools, transfer, end_call, voicemail, the analysis, the turns and the transcript all
   come from the session code.
4. Virtual time: the session moves its clock only from one scripted instant to the next (a mark played, the caller
   starts or stops speaking, the maximum duration), after the agent's work has settled: :class:`Activity` counts
   the conversation's I/O (units of work, the egress, the model) and the session waits until none is running and
   the event loop has had turns to spare. A simulated call takes milliseconds of CPU, whatever its length.
"""
