// The status page's one script. A row of a cleaning lock follows its lock
// through /api/lock every second (its state and the files still pending,
// down to 0 and UNLOCKED); a page whose body has data-refresh="N" is
// fetched again every N seconds and its <main> replaced. Without the
// script the page shows the same, only still.
(function () {
  "use strict";
  function follow() {
    document.querySelectorAll('tr[data-lock][data-state="CLEANING"]').forEach(function (tr) {
      fetch("/api/lock?path=" + encodeURIComponent(tr.dataset.lock), { cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (l) {
          if (!l) { return; }
          tr.dataset.state = l.state;
          var st = tr.querySelector(".state");
          st.textContent = l.state;
          st.className = "state " + l.state;
          tr.querySelector(".pending").textContent = l.state === "CLEANING" ? l.pending_files : "";
        })
        .catch(function () {});
    });
  }
  setInterval(follow, 1000);
  var every = Number(document.body.dataset.refresh || 0);
  if (every > 0) {
    setInterval(function () {
      if (document.hidden) { return; }
      fetch(location.href, { cache: "no-store" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          var main = html && new DOMParser().parseFromString(html, "text/html").querySelector("main");
          if (main) { document.querySelector("main").replaceWith(main); }
        })
        .catch(function () {});
    }, every * 1000);
  }
})();
