// The evo web console: plain DOM, no framework. Every action is a control
// request (the ones evoctl sends) posted to /ui/api/ctl with the page's
// CSRF token; /ui/events says what changed, and the open page refetches it.
// Text from servers is untrusted: it only ever goes in as textContent.
(function () {
  "use strict";
  var me = document.currentScript;
  if (me && me.dataset.redirect) {
    // The signed-in page: move on, dropping the one-time link from history.
    location.replace(me.dataset.redirect);
    return;
  }
  var meta = function (n) { var m = document.querySelector('meta[name="' + n + '"]'); return m ? m.content : ""; };
  var csrf = meta("csrf");
  var owner = meta("owner") === "true";
  var $ = function (id) { return document.getElementById(id); };

  // h("td", {class: "x"}, "text", child…)
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
        else if (k === "class") el.className = v;
        else el.setAttribute(k, v === true ? "" : v);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(el, x); }); return; }
    el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function fill(el, children) { el.replaceChildren(); add(el, children); }
  // Whether `el` already shows `data`: then it is left alone, so a live
  // refresh does not take the focus from a button a person is on.
  function same(el, data) {
    var sig = JSON.stringify(data);
    if (el.dataset.sig === sig) return true;
    el.dataset.sig = sig;
    return false;
  }
  function rows(table, list) { fill(table.tBodies[0], list); }
  function json(v) { return JSON.stringify(v, null, 2); }
  function ago(s) {
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    return Math.floor(s / 3600) + " h";
  }
  function empty(cols, text) { return h("tr", null, h("td", { colspan: cols, class: "meta" }, text)); }

  // Messages stack (newest last) and each fades on its own.
  function notice(text, error) {
    var n = $("notice");
    var p = h("p", { class: error ? "error" : null }, text);
    n.appendChild(p);
    while (n.childNodes.length > 4) n.removeChild(n.firstChild);
    n.hidden = false;
    setTimeout(function () {
      if (p.parentNode) n.removeChild(p);
      n.hidden = !n.childNodes.length;
    }, error ? 20000 : 8000);
  }

  var signedOut = false;
  function showSignedOut() {
    if (signedOut) return;
    signedOut = true;
    setConn("signed out", "down");
    notice("This console session ended (it expired, or evod restarted and forgot it). Run `evoctl ui` for a new sign-in link.", true);
  }

  // One control request, as evoctl sends it.
  function ctl(req) {
    return fetch("/ui/api/ctl", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(req)
    }).then(function (r) {
      if (r.status === 401) { showSignedOut(); throw new Error("signed out"); }
      return r.json();
    });
  }
  // An action: says what happened, then refreshes the page.
  function act(req, done) {
    return ctl(req).then(function (rep) {
      if (rep.ok) notice((rep.data && rep.data.message) || describeChange(req, rep.data));
      else notice(rep.error || "refused", true);
      if (done) done(rep);
      refresh();
      return rep;
    }).catch(function (e) { notice("evod did not answer: " + e.message, true); });
  }
  function describeChange(req, data) {
    if (!data) return "done";
    var on = req.cmd === "activate";
    var what = data.changed && data.changed.length ? data.changed.join(", ") : "nothing (no change)";
    if (data.profile) return (on ? "added to profile " : "removed from profile ") + data.profile + ": " + what;
    if (data.session) return (on ? "activated in session " : "deactivated in session ") + data.session + ": " + what;
    return "done";
  }

  // ---- pages
  var pages = {};
  var current = "overview";

  pages.overview = function () {
    return ctl({ cmd: "status" }).then(function (rep) {
      if (!rep.ok) return notice(rep.error, true);
      var s = rep.data;
      var d = s.daemon;
      fill($("daemon"), ["evod " + d.version + " · pid " + d.pid + " · up " + ago(d.uptime_s) + " · " + d.tools + " tools · integrity " + s.integrity +
        " · search " + ((s.search && s.search.stages) || ["lexical"]).join(" + ") + (s.http ? " · HTTP " + s.http.listen + s.http.path : "")]);
      var shown = s.servers.map(function (v) { return [v.id, v.state, v.tools, v.restarts, v.auth, v.error, v.stderr_tail, v.transport]; });
      if (!same($("servers"), shown)) rows($("servers"), s.servers.length ? s.servers.map(function (v) {
        var auth = v.auth && v.auth.state ? v.auth.state : "none";
        var err = [];
        if (v.error) err.push(h("div", { class: "error" }, v.error));
        if (v.stderr_tail && v.stderr_tail.length) err.push(h("details", null, h("summary", null, "stderr tail"), h("pre", null, v.stderr_tail.join("\n"))));
        return h("tr", { "data-id": v.id },
          h("td", null, v.id, h("div", { class: "meta" }, v.transport || "")),
          h("td", { class: "state state-" + v.state }, v.state),
          h("td", { class: "num" }, v.tools),
          h("td", { class: "num" }, v.restarts),
          h("td", null, auth),
          h("td", null, err.length ? err : "—"),
          owner ? h("td", null, v.transport ? h("button", { type: "button", class: "refresh", "aria-label": "restart and re-discover " + v.id,
            onclick: function () { act({ cmd: "refresh", server: v.id }); } }, "Refresh") : null) : null);
      }) : [empty(7, "no servers configured")]);
      var sess = s.sessions.map(function (x) { return [x.id, x.name, x.mode, x.profile, x.era, x.identity, x.activated]; });
      if (!same($("overview-sessions"), sess)) rows($("overview-sessions"), s.sessions.length ? s.sessions.map(function (x) {
        return h("tr", { "data-id": x.id },
          h("td", null, x.id + (x.name ? " (" + x.name + ")" : "")), h("td", null, x.mode), h("td", null, x.profile || "—"),
          h("td", null, x.era), h("td", null, x.identity || "local"), h("td", { class: "num" }, x.activated.length));
      }) : [empty(6, "no live sessions")]);
      if (same($("health"), [s.config, s.permissions])) { counts(s); return; }
      var health = [];
      [["config", s.config], ["permissions", s.permissions]].forEach(function (p) {
        var f = p[1];
        var mark = f.missing ? ["none", "– "] : f.ok ? ["ok", "✓ "] : ["bad", "✗ "];
        health.push(h("li", null, h("span", { class: mark[0] }, mark[1]), p[0] + " ", h("code", null, f.path),
          f.missing ? " (no such file: its defaults apply)" : null,
          f.error ? h("div", { class: "error" }, f.error) : null));
        (f.warnings || []).forEach(function (w) {
          health.push(h("li", { class: "warn" }, w.file + (w.line ? ":" + w.line : "") + ": " + w.message));
        });
      });
      if (owner) health.push(h("li", null, h("button", { type: "button", id: "reload", onclick: function () { act({ cmd: "reload" }); } }, "Reload config and permissions")));
      fill($("health"), health);
      counts(s);
    });
  };

  function counts(s) {
    $("integrity-count").textContent = s.quarantined && s.quarantined.length ? s.quarantined.length : "";
  }

  // The whole catalog with each tool's permission: fetched again only
  // when the catalog changed (it can be thousands of tools).
  var permissions = {};
  var catalogList = null;
  var shownTool = null;
  pages.catalog = function () {
    var q = $("search").value.trim();
    var list = catalogList ? Promise.resolve(catalogList) : ctl({ cmd: "list", all: true }).then(function (rep) {
      permissions = {};
      if (rep.ok) { rep.data.tools.forEach(function (t) { permissions[t.name] = t; }); catalogList = rep; }
      return rep;
    });
    return list.then(function (all) {
      if (!q) {
        $("search-note").textContent = all.ok ? all.data.tools.length + " tools in the catalog" : all.error;
        rows($("results"), all.ok && all.data.tools.length ? all.data.tools.map(function (t) { return toolRow(t, null); }) : [empty(5, "no tools")]);
        return showTool();
      }
      return ctl({ cmd: "search", query: q, explain: true, limit: 20 }).then(function (rep) {
        if (!rep.ok) return notice(rep.error, true);
        var r = rep.data;
        var note = r.results.length + " matches for “" + r.query + "”";
        if (r.reason) note += " — " + r.reason;
        if (r.unavailable && r.unavailable.length) note += " — " + r.unavailable.join(" ");
        $("search-note").textContent = note;
        rows($("results"), r.results.length ? r.results.map(function (t) { return toolRow(t, t.explain); }) : [empty(5, "nothing matches")]);
        return showTool();
      });
    });
  };
  function stages(x) {
    if (!x) return "";
    var parts = ["lexical " + x.lexical];
    if (x.semantic !== undefined) parts.push("semantic " + x.semantic);
    if (x.fused !== undefined) parts.push("fused " + x.fused);
    if (x.near_duplicate_of) parts.push("near-duplicate of " + x.near_duplicate_of + " (" + x.similarity + ")");
    return parts.join(" · ");
  }
  function toolRow(t, explain) {
    var p = permissions[t.name] || t;
    return h("tr", { "data-name": t.name },
      h("td", null, h("button", { class: "link", type: "button", onclick: function () { shownTool = t.name; showTool(); } }, t.name),
        h("div", { class: "meta" }, t.domain)),
      h("td", { class: "num" }, t.score !== undefined ? t.score : ""),
      h("td", { class: "mono stages" }, stages(explain)),
      h("td", null, p.permission || "", p.rule ? h("div", { class: "meta" }, p.rule) : null),
      h("td", null, t.summary));
  }
  function showTool() {
    var box = $("tool");
    if (!shownTool) { fill(box, null); return Promise.resolve(); }
    var name = shownTool;
    return ctl({ cmd: "describe", name: name }).then(function (rep) {
      if (shownTool !== name) return;
      if (!rep.ok) { fill(box, [h("h2", null, name), h("p", { class: "error" }, rep.error)]); return; }
      var t = rep.data;
      var p = permissions[t.name] || {};
      fill(box, [
        h("h2", { id: "tool-name" }, t.name),
        h("p", { class: "meta" }, "server " + t.server + " · upstream " + t.upstream + " · domain " + t.domain + (t.hot ? " · hot" : "")),
        h("p", null, "Permission: ", h("strong", { id: "tool-permission" }, p.permission || "allow"), p.rule ? " — decided by " + p.rule : ""),
        t.description ? h("p", null, t.description) : null,
        h("h3", null, "Input schema"), h("pre", { id: "tool-schema" }, json(t.input_schema)),
        h("h3", null, "Example call"), h("pre", { id: "tool-example" }, json(t.example))
      ]);
    });
  }

  pages.sessions = function () {
    return ctl({ cmd: "sessions" }).then(function (rep) {
      if (!rep.ok) return notice(rep.error, true);
      var list = rep.data.sessions;
      if (same($("sessions"), list.map(function (x) { return [x.id, x.name, x.mode, x.profile, x.io, x.era, x.identity, x.activated]; }))) return;
      fill($("sessions"), list.length ? list.map(function (x) {
        var input = h("input", { type: "text", placeholder: "tool names, space-separated", "aria-label": "tools to activate in " + x.id });
        return h("div", { class: "card", "data-id": x.id },
          h("h2", null, x.id + (x.name ? " (" + x.name + ")" : "")),
          h("p", { class: "meta" }, "mode " + x.mode + " · profile " + (x.profile || "none") + " · " + x.io + " · " + x.era + " · " + (x.identity || "local") + " · active " + ago(x.last_active) + " ago"),
          h("h3", null, "Activated"),
          x.activated.length ? h("ul", { class: "chips" }, x.activated.map(function (t) {
            return h("li", null, t, owner ? h("button", { type: "button", class: "deactivate", "aria-label": "deactivate " + t,
              onclick: function () { act({ cmd: "deactivate", tools: [t], session: x.id }); } }, "×") : null);
          })) : h("p", { class: "meta" }, "none"),
          owner ? h("form", { class: "add", onsubmit: function (e) {
            e.preventDefault();
            var tools = input.value.split(/[\s,]+/).filter(Boolean);
            if (tools.length) act({ cmd: "activate", tools: tools, session: x.id }, function (r) { if (r.ok) input.value = ""; });
          } }, input, h("button", { type: "submit", class: "primary" }, "Activate")) : null);
      }) : [h("p", { class: "meta" }, "No live sessions. Connect an MCP client through `evoctl shim`.")]);
    });
  };

  pages.profiles = function () {
    return ctl({ cmd: "profiles" }).then(function (rep) {
      if (!rep.ok) return notice(rep.error, true);
      var list = rep.data.profiles;
      if (same($("profiles"), list)) return;
      fill($("profiles"), list.length ? list.map(function (p) {
        var input = h("input", { type: "text", placeholder: "tool names", "aria-label": "tools to add to " + p.name });
        return h("div", { class: "card", "data-name": p.name },
          h("h2", null, p.name),
          h("p", { class: "meta" }, "patterns: " + (p.patterns.join(", ") || "none") + " · " + p.count + " tools · " + p.sessions + " sessions" +
            (p.added.length ? " · added " + p.added.join(", ") : "") + (p.removed.length ? " · removed " + p.removed.join(", ") : "")),
          p.denied.length ? h("p", { class: "warn" }, "denied by permissions: " + p.denied.join(", ")) : null,
          p.unmatched.length ? h("p", { class: "warn" }, "match no tool: " + p.unmatched.join(", ")) : null,
          p.tools.length ? h("ul", { class: "chips" }, p.tools.map(function (t) {
            return h("li", null, t, owner ? h("button", { type: "button", "aria-label": "remove " + t + " from " + p.name,
              onclick: function () { act({ cmd: "deactivate", tools: [t], profile: p.name }); } }, "×") : null);
          })) : h("p", { class: "meta" }, "no tools"),
          owner ? h("form", { class: "add", onsubmit: function (e) {
            e.preventDefault();
            var tools = input.value.split(/[\s,]+/).filter(Boolean);
            if (tools.length) act({ cmd: "activate", tools: tools, profile: p.name }, function (r) { if (r.ok) input.value = ""; });
          } }, input, h("button", { type: "submit", class: "primary" }, "Add")) : null);
      }) : [h("p", { class: "meta" }, "No profiles: define them under `profiles` in the config.")]);
    });
  };

  function decide(a, approve) {
    var verb = approve ? "approve" : "deny";
    return ctl({ cmd: verb, id: a.id }).then(function (rep) {
      if (rep.ok) notice(rep.data.message);
      else notice(a.id + " could not be " + (approve ? "approved" : "denied") + ": it was already decided elsewhere or has expired (" + rep.error + "). The list is refreshed.", true);
      refresh();
    }).catch(function (e) { notice("evod did not answer: " + e.message, true); });
  }
  pages.approvals = function () {
    return ctl({ cmd: "approvals" }).then(function (rep) {
      if (!rep.ok) return notice(rep.error, true);
      var list = rep.data.approvals;
      $("approvals-count").textContent = list.length ? list.length : "";
      if (same($("approvals"), list.map(function (a) { return [a.id, a.tool, a.arguments, a.identity]; }))) return;
      rows($("approvals"), list.length ? list.map(function (a) {
        return h("tr", { "data-id": a.id, "data-tool": a.tool },
          h("td", { class: "mono" }, a.id), h("td", null, a.tool), h("td", null, h("pre", null, a.arguments)),
          h("td", { class: "num" }, ago(a.age_s)), h("td", null, a.identity || "local"),
          h("td", null, owner ? [h("button", { type: "button", class: "primary approve", onclick: function () { decide(a, true); } }, "Approve"), " ",
            h("button", { type: "button", class: "danger deny", onclick: function () { decide(a, false); } }, "Deny")] : "owner only"));
      }) : [empty(6, "no calls are waiting")]);
    });
  };

  pages.integrity = function () {
    return ctl({ cmd: "status" }).then(function (rep) {
      if (!rep.ok) return notice(rep.error, true);
      var s = rep.data;
      counts(s);
      var held = s.quarantined || [];
      var box = $("quarantined");
      if (!held.length) {
        if (same(box, s.integrity)) return;
        fill(box, [h("p", { class: "meta", id: "integrity-clear" }, s.integrity === "off" ? "integrity is off: nothing is pinned or checked" : "No tool changed since it was pinned.")]);
        return;
      }
      var servers = [];
      held.forEach(function (q) { if (servers.indexOf(q.server) < 0) servers.push(q.server); });
      return Promise.all(servers.map(function (server) { return ctl({ cmd: "diff", server: server }); })).then(function (diffs) {
        if (same(box, diffs)) return;
        var cards = [];
        diffs.forEach(function (rep, i) {
          if (!rep.ok) { cards.push(h("p", { class: "error" }, servers[i] + ": " + rep.error)); return; }
          rep.data.tools.forEach(function (t) {
            cards.push(h("div", { class: "card", "data-server": rep.data.server, "data-tool": t.name },
              h("h2", null, t.name),
              h("p", { class: "meta" }, "server " + rep.data.server + " · upstream " + t.tool + " · changed: " + t.changed.join(", ") + " · drift " + t.drift +
                (s.integrity === "pin" ? " · hidden and refused until trusted" : " · still usable (integrity: warn)")),
              h("pre", { class: "diff" }, t.diff.split("\n").map(function (line) {
                var c = line.charAt(0);
                var kind = line.slice(0, 3) === "+++" || line.slice(0, 3) === "---" ? "meta" : c === "+" ? "ins" : c === "-" ? "del" : null;
                return h("span", { class: kind }, line + "\n");
              })),
              owner ? h("button", { type: "button", class: "primary trust", onclick: function () {
                act({ cmd: "trust", server: rep.data.server, tool: t.tool });
              } }, "Trust the new definition") : null));
          });
        });
        fill(box, cards);
      });
    });
  };

  // ---- log
  var logLines = [];
  var levels = { ERROR: 0, WARN: 1, INFO: 2, DEBUG: 3, TRACE: 4 };
  var servers = {};
  function logRow(l) {
    var t = new Date(l.t);
    return h("div", { class: "lv-" + l.level, "data-server": l.server || "" },
      t.toLocaleTimeString() + " " + l.level.padEnd(5) + " " + (l.server ? "[" + l.server + "] " : "") + l.msg);
  }
  function logShown(l) {
    var want = $("log-server").value, lv = $("log-level").value;
    return levels[l.level] <= levels[lv] && (!want || l.server === want);
  }
  function noteServer(l) {
    if (l.server && !servers[l.server]) {
      servers[l.server] = true;
      $("log-server").appendChild(h("option", { value: l.server }, l.server));
    }
  }
  function renderLog() {
    var box = $("log");
    fill(box, logLines.filter(logShown).map(logRow));
    if ($("log-follow").checked) box.scrollTop = box.scrollHeight;
  }
  function addLog(l) {
    logLines.push(l);
    if (logLines.length > 1000) logLines.shift();
    noteServer(l);
    if (current === "log" && logShown(l)) {
      var box = $("log");
      box.appendChild(logRow(l));
      while (box.childNodes.length > 1000) box.removeChild(box.firstChild);
      if ($("log-follow").checked) box.scrollTop = box.scrollHeight;
    }
  }
  pages.log = function () { renderLog(); return Promise.resolve(); };
  $("log-server").addEventListener("change", renderLog);
  $("log-level").addEventListener("change", renderLog);
  $("log-filter").addEventListener("submit", function (e) { e.preventDefault(); });

  // ---- navigation and refresh
  // Which pings each page refetches for (the approvals count is on every page).
  var interests = {
    overview: ["servers", "sessions", "catalog"],
    catalog: ["catalog"],
    sessions: ["sessions"],
    profiles: ["profiles", "catalog", "sessions"],
    approvals: [],
    integrity: ["catalog", "servers"],
    log: []
  };
  var pending = null, running = false, again = false;
  function refresh() {
    if (pending) return;
    pending = setTimeout(run, 15);
  }
  function run() {
    pending = null;
    if (running) { again = true; return; }
    running = true;
    var page = current;
    var work = [pages[page]()];
    if (page !== "approvals") work.push(ctl({ cmd: "approvals" }).then(function (rep) {
      if (rep.ok) $("approvals-count").textContent = rep.data.approvals.length || "";
    }));
    Promise.all(work).catch(function () {}).then(function () {
      running = false;
      document.body.dataset.rendered = page + ":" + Date.now();
      if (again) { again = false; refresh(); }
    });
  }
  function show(page) {
    if (!pages[page]) page = "overview";
    current = page;
    document.querySelectorAll("main > section").forEach(function (s) { s.hidden = s.dataset.page !== page; });
    document.querySelectorAll("#nav a").forEach(function (a) {
      if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    document.title = page.charAt(0).toUpperCase() + page.slice(1) + " · evo console";
    refresh();
  }
  window.addEventListener("hashchange", function () { show(location.hash.slice(1)); $("main").focus(); });
  $("search-form").addEventListener("submit", function (e) { e.preventDefault(); shownTool = null; refresh(); });

  // ---- live updates
  var conn = $("conn");
  function setConn(text, cls) { conn.textContent = text; conn.className = "conn " + (cls || ""); }
  var run_id = null, lost = false, source = null;
  function connect() {
    if (signedOut) return;
    source = new EventSource("/ui/events");
    source.addEventListener("hello", function (e) {
      catalogList = null;
      var hello = JSON.parse(e.data);
      if (run_id && hello.run !== run_id) notice("evod restarted; the console reconnected.");
      else if (lost) notice("reconnected to evod.");
      run_id = hello.run;
      lost = false;
      setConn("live", "live");
      refresh();
    });
    source.addEventListener("backlog", function (e) {
      logLines = [];
      JSON.parse(e.data).forEach(function (l) { logLines.push(l); noteServer(l); });
      if (current === "log") renderLog();
    });
    source.addEventListener("log", function (e) { addLog(JSON.parse(e.data)); });
    source.addEventListener("changed", function (e) {
      var topics = JSON.parse(e.data).topics;
      if (topics.indexOf("catalog") >= 0 || topics.indexOf("all") >= 0) catalogList = null;
      var wants = interests[current] || [];
      if (topics.some(function (t) { return t === "all" || t === "approvals" || wants.indexOf(t) >= 0; })) refresh();
    });
    source.onerror = function () {
      lost = true;
      setConn("reconnecting to evod…", "down");
      if (source.readyState === EventSource.CLOSED) {
        // Refused (not a dropped connection): find out whether we are still
        // signed in, then try again.
        source = null;
        ctl({ cmd: "approvals" }).then(function () { setTimeout(connect, 1000); }, function () { setTimeout(connect, 1000); });
      }
    };
  }
  if (!owner) notice("Signed in with a token: this console reads only. Decisions are for evod's owner (`evoctl ui`).");
  show(location.hash.slice(1) || "overview");
  connect();
})();
