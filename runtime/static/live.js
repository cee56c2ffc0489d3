// Live updates: when the log moves, fetch this page again and swap in its <main>, no reload.
// Without script the page still works; forms post and redirect.
(function () {
  "use strict";
  var main = document.querySelector("main");
  if (!main || !window.EventSource || !window.DOMParser || !window.fetch) return;

  var known = main.getAttribute("data-last-seq");
  var stale = false;  // a change is not shown yet: the user was typing, or the fetch failed
  var busy = false;
  var again = false;  // a change came while a fetch was in flight, which may predate it

  // A swap would wipe what the user is typing (a deny reason, a filter): wait until they leave it.
  function typing() {
    var el = document.activeElement;
    return !!el && main.contains(el) && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName);
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var next = fresh.querySelector("main");
    if (!next) return;
    var nodes = Array.prototype.map.call(next.childNodes, function (n) { return document.importNode(n, true); });
    main.replaceChildren.apply(main, nodes);
    main.setAttribute("data-last-seq", next.getAttribute("data-last-seq") || "");
    var count = document.getElementById("pending-count");
    var freshCount = fresh.getElementById("pending-count");
    if (count && freshCount) {
      count.textContent = freshCount.textContent;
      count.className = freshCount.className;
    }
    if (fresh.title) document.title = fresh.title;
  }

  function refresh() {
    if (typing()) { stale = true; return; }
    if (busy) { again = true; return; }
    busy = true;
    stale = false;
    again = false;
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        if (typing()) { stale = true; return; }
        swap(html);
      })
      .catch(function () { stale = true; })
      .then(function () {
        busy = false;
        if (again) refresh();
      });
  }

  var source = new EventSource("/stream");
  source.addEventListener("changed", function (event) {
    if (event.data !== known || stale) {
      known = event.data;
      refresh();
    }
  });

  main.addEventListener("focusout", function () {
    // After the blur settles: focus may just be moving to another field of the same form.
    setTimeout(function () { if (stale && !typing()) refresh(); }, 0);
  });
})();
