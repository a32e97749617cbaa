// Live parts of the converge debug page: every two seconds, fetch the same
// URL and swap in the elements marked data-live, leaving the search form
// alone. Nothing is loaded from anywhere else.
"use strict";
(function () {
  // A table wider than its box scrolls sideways; mark its box so that a
  // shadow says there is more to the right.
  function markOverflow() {
    for (const el of document.querySelectorAll(".scroll")) {
      el.classList.toggle("overflows", el.scrollWidth > el.clientWidth + 1);
    }
  }
  async function refresh() {
    try {
      const res = await fetch(location.href, { cache: "no-store", credentials: "same-origin" });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      for (const el of document.querySelectorAll("[data-live]")) {
        const fresh = doc.getElementById(el.id);
        if (fresh) el.innerHTML = fresh.innerHTML;
      }
      markOverflow();
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed) + 1);
    } catch (e) {
      // The manager went away or the network dropped: try again later.
    }
  }
  markOverflow();
  window.addEventListener("resize", markOverflow);
  setInterval(refresh, 2000);
})();
