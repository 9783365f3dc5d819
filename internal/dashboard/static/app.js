// reclaimer dashboard: countdowns, copy buttons, confirmations and live
// updates. The pages work without it.
(function () {
  'use strict';
  var body = document.body;
  // The server's clock, so countdowns agree with what it will do.
  var skew = 0;
  var serverNow = Date.parse(body.dataset.now || '');
  if (!isNaN(serverNow)) { skew = serverNow - Date.now(); }

  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400); s -= d * 86400;
    var h = Math.floor(s / 3600); s -= h * 3600;
    var m = Math.floor(s / 60); s -= m * 60;
    if (d > 0) { return d + 'd ' + h + 'h'; }
    if (h > 0) { return h + 'h ' + m + 'm'; }
    if (m > 0) { return m + 'm ' + s + 's'; }
    return s + 's';
  }
  function rel(t) {
    var ms = Date.parse(t) - (Date.now() + skew);
    if (Math.abs(ms) < 1000) { return 'now'; }
    return ms > 0 ? 'in ' + span(ms) : span(ms) + ' ago';
  }
  function tick() {
    var els = document.querySelectorAll('time[data-countdown], time[data-relative]');
    for (var i = 0; i < els.length; i++) {
      var t = els[i].getAttribute('datetime');
      if (t) { els[i].textContent = rel(t); }
    }
  }
  setInterval(tick, 1000);

  document.addEventListener('click', function (e) {
    var b = e.target.closest && e.target.closest('button[data-copy]');
    if (!b) { return; }
    var text = b.getAttribute('data-copy');
    var shown = function () { b.textContent = 'Copied'; setTimeout(function () { b.textContent = 'Copy'; }, 2000); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(shown, function () { selectNear(b); });
    } else {
      selectNear(b);
    }
  });
  function selectNear(b) {
    var input = b.parentNode.querySelector('input.command');
    if (input) { input.focus(); input.select(); }
  }

  document.addEventListener('submit', function (e) {
    var f = e.target;
    var q = f.getAttribute('data-confirm');
    if (q && !window.confirm(q)) { e.preventDefault(); }
  });

  // Live updates: when a pass ends or activity arrives, fetch this page
  // again and swap its content, unless someone is typing in it.
  if (!body.dataset.live || !window.EventSource || !window.fetch || !window.DOMParser) { return; }
  var live = document.getElementById('live');
  var pending = null;
  var busy = false;
  function refresh() {
    pending = null;
    var a = document.activeElement;
    if (busy || (a && a.closest && a.closest('main') && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName))) {
      schedule(3000);
      return;
    }
    busy = true;
    fetch(location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } }).then(function (r) {
      if (r.redirected && /\/login/.test(r.url)) { location.reload(); return null; }
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) { return; }
      var doc = new DOMParser().parseFromString(html, 'text/html');
      var fresh = doc.querySelector('main');
      var cur = document.querySelector('main');
      if (fresh && cur) {
        cur.innerHTML = fresh.innerHTML;
        var now = Date.parse(doc.body.dataset.now || '');
        if (!isNaN(now)) { skew = now - Date.now(); }
        body.dataset.updated = String(Date.now());
        if (live) { live.textContent = '· updated ' + new Date().toLocaleTimeString(); }
      }
    }).catch(function () {}).then(function () { busy = false; });
  }
  function schedule(ms) {
    if (!pending) { pending = setTimeout(refresh, ms); }
  }
  // A pass changes what most pages show: soon. Activity arrives in bursts
  // on a busy host: at most one reload in a few seconds for it.
  var es = new EventSource('/events');
  es.addEventListener('pass', function () { schedule(200); });
  es.addEventListener('activity', function () { schedule(5000); });
  es.addEventListener('open', function () { body.dataset.events = 'open'; });
})();
