// Live updates: when the log moves, fetch this page again and swap in its <main>, no reload; when what
// a task is doing now changes (which moves no log), write it into the task's "Now" line.
// Without script the page still works; forms post and redirect.
(function () {
  "use strict";
  var main = document.querySelector("main");
  if (!main || !window.EventSource || !window.DOMParser || !window.fetch) return;

  var known = main.getAttribute("data-last-seq");
  var stale = false;  // a change is not shown yet: the user was typing, or the fetch failed
  var busy = false;
  var again = false;  // a change came while a fetch was in flight, which may predate it
  var board = null;  // the last `progress` event: task id -> {line, bar, done, total}

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
    // The stream's board is at least as fresh as the page just fetched.
    showProgress();
  }

  function showProgress() {
    var now = document.getElementById("now");
    if (!now || !board) return;
    var entry = board[now.getAttribute("data-task")];
    var text = now.querySelector(".now-line");
    var bar = now.querySelector(".now-bar");
    if (text) text.textContent = entry ? entry.line : (now.getAttribute("data-idle") || "");
    if (!bar) return;
    if (entry && entry.bar && entry.total > 0) {
      bar.max = entry.total;
      bar.value = entry.done;
      bar.hidden = false;
    } else {
      bar.hidden = true;
    }
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

  source.addEventListener("progress", function (event) {
    try { board = JSON.parse(event.data); } catch (e) { return; }
    showProgress();
  });

  main.addEventListener("focusout", function () {
    // After the blur settles: focus may just be moving to another field of the same form.
    setTimeout(function () { if (stale && !typing()) refresh(); }, 0);
  });
})();
