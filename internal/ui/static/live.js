// Follows the page's live region: the server sends it again, rendered,
// whenever a watch sees a change (Server-Sent Events). Without this
// script the page is complete; it is just not updated.
(function () {
  "use strict";
  var url = document.body.getAttribute("data-live");
  var region = document.getElementById("live");
  var state = document.getElementById("livestate");
  if (!url || !region || !window.EventSource) {
    return;
  }
  var source = new EventSource(url);
  source.addEventListener("update", function (e) {
    // The server's HTML, escaped by its templates; the page's policy
    // allows no inline script, so none can run from it.
    region.innerHTML = e.data;
    document.body.setAttribute("data-updated", new Date().toISOString());
  });
  source.onopen = function () {
    if (state) { state.textContent = "Live: this page follows changes as they happen."; }
  };
  source.onerror = function () {
    if (!state) { return; }
    // CLOSED: the dashboard refused to open the stream again (signed out,
    // or no longer allowed to see this page).
    state.textContent = source.readyState === EventSource.CLOSED
      ? "Live updates stopped: reload the page (you may have to sign in again)."
      : "Live updates interrupted; reconnecting.";
  };
})();
