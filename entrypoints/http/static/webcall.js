/* Parley web calls: talk to an agent from the browser. Plain JavaScript, no build, no CDN.
 *
 *   var call = ParleyWebCall.start(websocketUrl, { onstate: function (state, detail) {} });
 *   call.hangup();
 *
 * The microphone (getUserMedia) is captured through a ScriptProcessor, downsampled to 16 kHz 16-bit PCM and sent
 * as binary websocket frames; the agent's audio comes back the same way and is played in order. The protocol
 * (docs/calls.md, Web calls): {"event":"start"} first; the server's {"event":"mark"} is echoed once the audio
 * before it has played; {"event":"clear"} drops what is still buffered (the caller interrupted the agent).
 *
 * On a page, a button with data-parley-talk="<url>" (and data-csrf) starts a call by POSTing to that URL, which
 * answers {"websocket_url": ...}: the dashboard's "Talk to this agent". States: connecting, live, ended, error. */
(function () {
  "use strict";
  var RATE = 16000;

  function downsample(input, fromRate) {
    if (fromRate === RATE) { return input; }
    var ratio = fromRate / RATE, length = Math.floor(input.length / ratio), out = new Float32Array(length);
    for (var i = 0; i < length; i++) {
      var start = Math.floor(i * ratio), end = Math.min(input.length, Math.floor((i + 1) * ratio)), sum = 0;
      for (var j = start; j < end; j++) { sum += input[j]; }
      out[i] = end > start ? sum / (end - start) : input[start] || 0;
    }
    return out;
  }

  function toPcm16(samples) {
    var pcm = new Int16Array(samples.length);
    for (var i = 0; i < samples.length; i++) {
      var s = Math.max(-1, Math.min(1, samples[i]));
      pcm[i] = s < 0 ? s * 0x8000 : s * 0x7fff;
    }
    return pcm.buffer;
  }

  function start(url, options) {
    options = options || {};
    var onstate = options.onstate || function () {};
    var AudioContextClass = window.AudioContext || window.webkitAudioContext;
    var context = new AudioContextClass();
    var socket = null, stream = null, processor = null, source = null, ended = false;
    var playAt = 0, playing = [], timers = [];

    function finish(state, detail) {
      if (ended) { return; }
      ended = true;
      timers.forEach(clearTimeout);
      if (processor) { processor.disconnect(); }
      if (source) { source.disconnect(); }
      if (stream) { stream.getTracks().forEach(function (t) { t.stop(); }); }
      if (socket && socket.readyState <= 1) { socket.close(1000); }
      setTimeout(function () { context.close(); }, 200);
      onstate(state, detail);
    }

    function play(buffer) {
      var samples = new Int16Array(buffer), floats = new Float32Array(samples.length);
      for (var i = 0; i < samples.length; i++) { floats[i] = samples[i] / 0x8000; }
      var audio = context.createBuffer(1, floats.length, RATE);
      audio.getChannelData(0).set(floats);
      var node = context.createBufferSource();
      node.buffer = audio;
      node.connect(context.destination);
      playAt = Math.max(playAt, context.currentTime + 0.05);
      node.start(playAt);
      playAt += audio.duration;
      playing.push(node);
      node.onended = function () { playing.splice(playing.indexOf(node), 1); };
    }

    function clear() {
      playing.slice().forEach(function (node) { try { node.stop(); } catch (e) { /* already stopped */ } });
      playing = [];
      playAt = context.currentTime;
    }

    function markPlayed(name) {
      var wait = Math.max(0, (playAt - context.currentTime) * 1000);
      timers.push(setTimeout(function () {
        if (socket && socket.readyState === 1) { socket.send(JSON.stringify({ event: "mark", name: name })); }
      }, wait));
    }

    onstate("connecting");
    navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } })
      .then(function (media) {
        if (ended) { media.getTracks().forEach(function (t) { t.stop(); }); return; }
        stream = media;
        socket = new WebSocket(url);
        socket.binaryType = "arraybuffer";
        socket.onopen = function () {
          socket.send(JSON.stringify({ event: "start", encoding: "pcm_s16le", sample_rate: RATE }));
          source = context.createMediaStreamSource(stream);
          processor = context.createScriptProcessor(2048, 1, 1);
          processor.onaudioprocess = function (event) {
            if (socket.readyState !== 1) { return; }
            socket.send(toPcm16(downsample(event.inputBuffer.getChannelData(0), context.sampleRate)));
          };
          source.connect(processor);
          processor.connect(context.destination);  // a ScriptProcessor runs only while connected (it outputs silence)
          if (context.state === "suspended") { context.resume(); }
        };
        socket.onmessage = function (event) {
          if (typeof event.data !== "string") { play(event.data); return; }
          var message = {};
          try { message = JSON.parse(event.data); } catch (e) { return; }
          if (message.event === "started") { onstate("live", message); }
          else if (message.event === "mark") { markPlayed(message.name); }
          else if (message.event === "clear") { clear(); }
        };
        socket.onclose = function () {
          var left = Math.max(0, (playAt - context.currentTime) * 1000);
          setTimeout(function () { finish("ended"); }, left);  // let the agent's last words play
        };
        socket.onerror = function () { finish("error", "connection"); };
      })
      .catch(function (error) { finish("error", error && error.name === "NotAllowedError" ? "microphone" : "media"); });

    return {
      hangup: function () {
        if (socket && socket.readyState === 1) { socket.send(JSON.stringify({ event: "stop" })); }
        finish("ended");
      }
    };
  }

  window.ParleyWebCall = { start: start, RATE: RATE };

  // the dashboard's "Talk to this agent" buttons
  function bind(button) {
    var status = document.getElementById(button.getAttribute("data-status") || "") || null;
    var current = null;
    var LABELS = { connecting: "Connecting…", live: "Talking: speak now", ended: "Call ended", error: "Could not start the call" };
    function say(state, detail) {
      if (status) { status.textContent = LABELS[state] + (state === "error" && detail ? " (" + detail + ")" : ""); }
      button.setAttribute("data-state", state);
    }
    button.addEventListener("click", function () {
      if (current) { current.hangup(); current = null; button.textContent = button.getAttribute("data-label"); return; }
      say("connecting");
      button.disabled = true;
      fetch(button.getAttribute("data-parley-talk"), {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRF-Token": button.getAttribute("data-csrf") || "", "Accept": "application/json" }
      }).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (json) { return { ok: r.ok, json: json }; });
      }).then(function (r) {
        button.disabled = false;
        if (!r.ok || !r.json.websocket_url) { say("error", r.json.message || ""); return; }
        button.textContent = "Hang up";
        current = start(r.json.websocket_url, {
          onstate: function (state, detail) {
            say(state, detail);
            if (state === "ended" || state === "error") { current = null; button.textContent = button.getAttribute("data-label"); }
          }
        });
      }).catch(function () { button.disabled = false; say("error", "network"); });
    });
    button.setAttribute("data-label", button.textContent);
  }

  function bindAll() {
    var buttons = document.querySelectorAll("[data-parley-talk]");
    for (var i = 0; i < buttons.length; i++) { bind(buttons[i]); }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", bindAll); } else { bindAll(); }
})();
