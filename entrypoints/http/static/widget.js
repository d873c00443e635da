/* Parley "Call me" / "Talk now" widget. Embed:
 *   <div id="parley-widget"></div>
 *   <script src="https://api.example/widget.js" data-token="..." data-target="#parley-widget" async></script>
 * Optional: data-title, data-button, data-talk="off" (no "Talk now"). The API base comes from this script's own src.
 * "Talk now" starts a web call in the browser (the microphone, through webcall.js, loaded from the same base).
 * Plain JavaScript, no build. */
(function () {
  "use strict";
  var script = document.currentScript ||
    document.querySelector('script[src*="widget.js"][data-token]');
  if (!script) { return; }
  var token = script.getAttribute("data-token") || "";
  var src = script.src.split("#")[0].split("?")[0];
  var base = src.replace(/\/widget\.js$/, "");
  if (!/\/(api\/)?v2$/.test(base)) { base += "/v2"; }

  function start() {
    var selector = script.getAttribute("data-target");
    var host = selector ? document.querySelector(selector) : null;
    if (!host) {
      host = document.createElement("div");
      script.parentNode.insertBefore(host, script.nextSibling);
    }
    var root = host.shadowRoot || (host.attachShadow ? host.attachShadow({ mode: "open" }) : host);
    root.innerHTML =
      "<style>" +
      ":host{all:initial}" +
      ".pw{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2430;background:#fff;" +
      "border:1px solid #e3e6ee;border-radius:14px;padding:20px 22px;max-width:340px;box-sizing:border-box;" +
      "box-shadow:0 6px 24px rgba(24,39,75,.08)}" +
      ".pw h2{margin:0 0 4px;font-size:18px;font-weight:650}" +
      ".pw p.sub{margin:0 0 14px;color:#5b6275;font-size:13px}" +
      ".pw label{display:block;font-size:12px;font-weight:600;color:#3c4354;margin:10px 0 4px}" +
      ".pw input{width:100%;box-sizing:border-box;padding:10px 12px;border:1px solid #cfd4df;border-radius:9px;" +
      "font:inherit;color:inherit;background:#fafbfd}" +
      ".pw input:focus{outline:none;border-color:#4f46e5;box-shadow:0 0 0 3px rgba(79,70,229,.18);background:#fff}" +
      ".pw button{margin-top:16px;width:100%;padding:11px 14px;border:0;border-radius:9px;background:#4f46e5;" +
      "color:#fff;font:inherit;font-weight:650;cursor:pointer}" +
      ".pw button:hover{background:#4338ca}.pw button:disabled{opacity:.6;cursor:default}" +
      ".pw button.talk{margin-top:8px;background:#fff;color:#4f46e5;border:1px solid #4f46e5}" +
      ".pw button.talk:hover{background:#f3f2fe}" +
      ".pw .msg{margin-top:12px;font-size:13px;min-height:18px}" +
      ".pw .ok{color:#0f7b45}.pw .err{color:#b42318}" +
      ".pw .foot{margin-top:10px;font-size:11px;color:#8a90a2;text-align:center}" +
      "</style>" +
      "<form class='pw' novalidate>" +
      "<h2></h2><p class='sub'>Leave your number and we will call you right away.</p>" +
      "<label for='pw-phone'>Phone number</label>" +
      "<input id='pw-phone' name='phone' type='tel' autocomplete='tel' required placeholder='+1 415 555 0100'>" +
      "<label for='pw-name'>Name <span style='font-weight:400;color:#8a90a2'>(optional)</span></label>" +
      "<input id='pw-name' name='name' type='text' autocomplete='name' maxlength='200' placeholder='Your name'>" +
      "<button type='submit'></button>" +
      "<button type='button' class='talk'>Talk now</button>" +
      "<div class='msg' role='status' aria-live='polite'></div>" +
      "<div class='foot'>Powered by Parley</div>" +
      "</form>";
    var form = root.querySelector("form");
    var title = root.querySelector("h2");
    var sub = root.querySelector(".sub");
    var button = root.querySelector("button[type=submit]");
    var talk = root.querySelector("button.talk");
    var msg = root.querySelector(".msg");
    var phoneInput = root.querySelector("#pw-phone");
    var nameInput = root.querySelector("#pw-name");
    title.textContent = script.getAttribute("data-title") || "Get a call back";
    button.textContent = script.getAttribute("data-button") || "Call me";

    function show(text, ok) {
      msg.textContent = text;
      msg.className = "msg " + (ok ? "ok" : "err");
    }

    function call(method, path, body) {
      return fetch(base + path, {
        method: method,
        mode: "cors",
        credentials: "omit",
        headers: body ? { "Authorization": "Widget " + token, "Content-Type": "application/json" }
          : { "Authorization": "Widget " + token },
        body: body ? JSON.stringify(body) : undefined
      }).then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (json) {
          return { status: response.status, json: json };
        });
      });
    }

    call("GET", "/widget/campaign").then(function (r) {
      var data = r.json && r.json.data;
      if (r.status !== 200 || !data) { return; }
      if (!script.getAttribute("data-title") && data.agent_name) { title.textContent = "Talk to " + data.agent_name; }
      if (!data.open_now && data.next_open_at) {
        sub.textContent = "Leave your number: we will call you from " +
          new Date(data.next_open_at).toLocaleString([], { weekday: "short", hour: "2-digit", minute: "2-digit" }) +
          ".";
      }
    }).catch(function () { /* the form still works */ });

    var ERRORS = {
      400: "Please check the number: use the international format, e.g. +14155550100.",
      401: "This form has expired. Please reload the page.",
      403: "This form is not enabled on this page.",
      409: "Calls are not being taken right now.",
      422: "Sorry, this number cannot be called.",
      429: "Too many requests. Please try again in a minute."
    };

    if (script.getAttribute("data-talk") === "off") { talk.parentNode.removeChild(talk); talk = null; }
    var talking = null;

    function webCallClient() {
      if (window.ParleyWebCall) { return Promise.resolve(window.ParleyWebCall); }
      return new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = base + "/webcall.js";
        tag.onload = function () { resolve(window.ParleyWebCall); };
        tag.onerror = reject;
        document.head.appendChild(tag);
      });
    }

    var TALK_STATES = { connecting: "Connecting… allow the microphone.", live: "You are talking to the agent: speak now.",
      ended: "Call ended. Thanks!", error: "The call could not start. Please try again." };

    if (talk) {
      talk.addEventListener("click", function () {
        if (talking) { talking.hangup(); return; }
        talk.disabled = true;
        show("Connecting…", true);
        call("POST", "/widget/web-calls", {}).then(function (r) {
          if (r.status !== 201) {
            talk.disabled = false;
            show(ERRORS[r.status] || "Something went wrong. Please try again.", false);
            return null;
          }
          return webCallClient().then(function (client) {
            talk.disabled = false;
            talk.textContent = "Hang up";
            talking = client.start(r.json.data.websocket_url, {
              onstate: function (state) {
                show(TALK_STATES[state] || "", state !== "error");
                if (state === "ended" || state === "error") { talking = null; talk.textContent = "Talk now"; }
              }
            });
          });
        }).catch(function () {
          talk.disabled = false;
          show("Could not reach the server. Please try again.", false);
        });
      });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var phone = phoneInput.value.replace(/[\s().-]/g, "");
      if (!phone) { show("Please enter your phone number.", false); phoneInput.focus(); return; }
      var body = { phone: phone };
      if (nameInput.value.trim()) { body.name = nameInput.value.trim(); }
      button.disabled = true;
      show("Sending…", true);
      call("POST", "/widget/contacts", body).then(function (r) {
        button.disabled = false;
        if (r.status === 201) {
          var data = r.json.data || {};
          show(data.call_id ? "Thanks! We are calling you now." : "Thanks! We will call you shortly.", true);
          form.reset();
          return;
        }
        show(ERRORS[r.status] || "Something went wrong. Please try again.", false);
      }).catch(function () {
        button.disabled = false;
        show("Could not reach the server. Please try again.", false);
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
