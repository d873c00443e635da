// A running campaign's page fetches its progress fragment again every few seconds (no framework, no CDN).
(function () {
  var box = document.getElementById("campaign-progress");
  if (!box || !box.dataset.refresh) return;
  var url = box.dataset.refresh, every = (parseInt(box.dataset.seconds, 10) || 3) * 1000;
  var finals = ["completed", "cancelled", "failed"];
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        // signed out meanwhile (the gate sends to the sign-in form): show that page instead
        if (r.redirected) { window.location.reload(); return null; }
        if (!r.ok) throw new Error(r.status);
        return r.text();
      })
      .then(function (html) {
        if (html === null) return;
        box.innerHTML = html;
        var pill = box.querySelector("[data-status]");
        if (pill && finals.indexOf(pill.dataset.status) >= 0) { window.location.reload(); return; }
        setTimeout(tick, every);
      })
      .catch(function () { setTimeout(tick, every * 3); });
  }
  setTimeout(tick, every);
})();
