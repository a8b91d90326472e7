// The landing page's script, served as /t.js (docs/landing-pages.md). It makes no request but
// the tracker's, sets no cookie, and needs nothing else on the page.
(function () {
  var me = document.currentScript, slug = me && me.getAttribute("data-link");
  if (!slug) return;
  var link = new URL(me.src).origin + "/l/" + encodeURIComponent(slug);
  var ids = new URLSearchParams();
  new URLSearchParams(location.search).forEach(function (value, name) {
    if (/^(fbclid|gclid|gbraid|wbraid|ttclid|ScCid|utm_\w+)$/.test(name)) ids.set(name, value);
  });
  document.cookie.split(/;\s*/).forEach(function (pair) {
    var at = pair.indexOf("="), name = pair.slice(0, at);
    if (name === "_fbp" || name === "_fbc") ids.set(name.slice(1), decodeURIComponent(pair.slice(at + 1)));
  });
  ids.set("page", location.origin + location.pathname);
  var query = "?" + ids;
  if (navigator.sendBeacon) navigator.sendBeacon(link + "/view" + query);
  var telegram = /^(https?:\/\/(t|telegram)\.me\/|tg:)/i;
  function ours(a) {
    // Marked buttons only, where the page marks any; else every Telegram address.
    return document.querySelector("a[data-tracker]")
      ? a.hasAttribute("data-tracker")
      : telegram.test(a.getAttribute("href") || "");
  }
  function rewrite(a) {
    if (ours(a)) a.href = link + query;
  }
  function all() {
    Array.prototype.forEach.call(document.querySelectorAll("a[href]"), rewrite);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
  else all();
  // A button a page builder adds later is rewritten when it is tapped.
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[href]");
    if (a) rewrite(a);
  }, true);
})();
