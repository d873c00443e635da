// A live view (calls, campaigns, a campaign, appointments): the server sends the changed part of the page as
// Server-Sent Events (entrypoints/http/dashboard/live.py) and this puts it in place. No framework, no CDN.
(function () {
  var box = document.querySelector("[data-live]");
  if (!box || !window.EventSource) return;
  var source = new EventSource(box.getAttribute("data-live"));
  source.addEventListener("update", function (event) {
    box.innerHTML = event.data;
  });
  // the stream ended: the session is over ("expired", the reload leads to the sign-in page) or the view will
  // not change any more ("reload": a finished campaign's buttons change)
  source.addEventListener("end", function () {
    source.close();
    window.location.reload();
  });
})();
