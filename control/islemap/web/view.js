// Drawing the map from what main.js holds: each region's elements are
// kept by key and changed only where what they show changed.

import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const svgNS = "http://www.w3.org/2000/svg";
const keyOf = (o) => (o.metadata.namespace ? o.metadata.namespace + "/" : "") + o.metadata.name;
// Past this many boards, a board is drawn small (name, LEDs, pod dots).
const manyBoards = 24;
// Lasting lines past this many are left out: a big island stays readable.
const maxLines = 300;
// A pod receiving at least this (bytes a second) carries packets: more
// than its probes alone send.
const liveBytesPerSecond = 256;

// The drawn elements by what they stand for (keyed keeps them).
const boardEls = new Map(), podEls = new Map(), items = new Map(), counters = new Map();
export function boardEl(name) { return boardEls.get(name); }
export function podEl(key) { return podEls.get(key); }
export function counterEl(name) { return counters.get(name); }
const itemEl = (kind, key) => items.get(kind + "|" + key);

function icon(name) {
  const s = document.createElementNS(svgNS, "svg");
  s.setAttribute("class", "icon");
  s.setAttribute("aria-hidden", "true");
  const u = document.createElementNS(svgNS, "use");
  u.setAttribute("href", "icons.svg#" + name);
  s.append(u);
  return s;
}

function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  e.append(...kids);
  return e;
}

function text(e, s) { if (e.textContent !== s) e.textContent = s; }
function attr(e, k, v) { if (e.getAttribute(k) !== v) e.setAttribute(k, v); }

// keyed makes box's children the elements of list, in order, reusing the
// element of each key; update(el, item) runs only when sig(item) changed.
// reg, if given, maps prefix+key to the element while it is drawn.
function keyed(box, list, key, make, update, sig, reg, prefix = "") {
  const old = box._keyed || new Map(), next = new Map();
  let prev = null;
  for (const it of list) {
    const k = key(it);
    let e = old.get(k);
    if (!e) {
      e = make(it, k);
      reg?.set(prefix + k, e);
    }
    const s = sig(it);
    if (e._sig !== s) { e._sig = s; update(e, it); }
    next.set(k, e);
    const want = prev ? prev.nextSibling : box.firstChild;
    if (e !== want) box.insertBefore(e, want);
    prev = e;
  }
  for (const [k, e] of old) {
    if (next.has(k)) continue;
    e.remove();
    if (reg?.get(prefix + k) === e) reg.delete(prefix + k);
  }
  box._keyed = next;
}

const byName = (a, b) => keyOf(a).localeCompare(keyOf(b));
const ready = (o) => (o.status?.conditions || []).some((c) => c.type === "Ready" && c.status === "True");

// store's view: the members and whether each is live.
function members(S) {
  const st = S.status?.store;
  if (!st) return S.status?.server ? [{ name: S.status.server, live: !S.apiDown, role: "" }] : [];
  return st.members.map((m) => {
    let live = m.known ? m.active : undefined;
    const node = S.objs.nodes.get(m.name);
    if (live === undefined) live = node ? ready(node) : true;
    if (S.apiDown) live = false;
    const role = m.name === st.leader ? "leader" : m.learner ? "learner" : "follower";
    return { ...m, live, role };
  });
}

// slicesByService groups the EndpointSlices by their Service's
// "NAMESPACE/NAME".
function slicesByService(S) {
  const out = new Map();
  for (const s of S.objs.slices.values()) {
    const k = s.metadata.namespace + "/" + (s.metadata.labels?.["kubernetes.io/service-name"] || "");
    if (!out.has(k)) out.set(k, []);
    out.get(k).push(s);
  }
  return out;
}

export function render(S, flows) {
  const slicesOf = slicesByService(S);
  lang = document.documentElement.lang;
  renderBanner(S);
  renderVillage(S);
  renderBoards(S);
  renderGates(S, slicesOf);
  renderGround(S);
  renderDetails(S);
  const tk = $("ticker");
  if (tk._sig !== S.ticker.join("\n")) {
    tk._sig = S.ticker.join("\n");
    tk.replaceChildren(...S.ticker.map((s) => el("li", "", s)));
  }
  flows.measure();
  // The lasting lines follow at most every linesEvery ms: in a burst of
  // changes the page is laid out for them a few times a second.
  const now = performance.now();
  if (now - linesAt >= linesEvery) {
    linesAt = now;
    flows.draw(lines(S, slicesOf));
  } else if (!linesLater) {
    linesLater = setTimeout(() => { linesLater = 0; linesAt = 0; again(); }, linesEvery - (now - linesAt));
  }
}
let lang = "en", linesAt = 0, linesLater = 0, again = () => {};
const linesEvery = 250;

// onRedraw sets what render calls when the lines it put off are due.
export function onRedraw(f) { again = f; }

function renderBanner(S) {
  const b = $("banner");
  const ms = members(S), voters = ms.filter((m) => !m.learner);
  const live = voters.filter((m) => m.live).length;
  let msg = "", warn = false;
  if (S.apiDown) msg = t("lighthouseDark");
  else if (S.status?.store && live * 2 <= voters.length) { msg = t("noQuorum"); warn = true; }
  else if (Object.values(S.state).includes("down")) { msg = t("reconnecting"); warn = true; }
  b.hidden = !msg;
  text(b, msg);
  b.classList.toggle("warn", warn);
  document.body.classList.toggle("api-down", S.apiDown);
}

function renderVillage(S) {
  keyed($("counters"), members(S), (m) => m.name, (m) => {
    const e = el("div", "counter", icon("lighthouse"), el("span", "label"));
    e.dataset.server = m.name;
    e.setAttribute("role", "listitem");
    e.tabIndex = 0;
    return e;
  }, (e, m) => {
    e.classList.toggle("leader", m.role === "leader");
    e.classList.toggle("down", !m.live);
    text(e.querySelector(".label"), `${m.name}\n${t(m.live ? (m.role || "ready") : "down")}`);
    attr(e, "aria-label", `${t("counter")} ${m.name}: ${t(m.live ? (m.role || "ready") : "down")}`);
  }, (m) => `${m.live}|${m.role}|${lang}`, counters);
  const st = S.status?.store;
  if (st) {
    const ms = members(S), voters = ms.filter((m) => !m.learner), live = voters.filter((m) => m.live).length;
    text($("tree-facts"), `${t("leader")}: ${st.leader || "—"} · ${t("term")} ${st.term} · ${t("commit")} ${st.commit}\n` +
      `${t("revision")} ${st.revision} · ${st.keys} ${t("keys")} · ${t("log")} ${(st.logBytes / 1024).toFixed(0)} KiB\n` +
      `${t("quorum")}: ${live}/${voters.length} ${live * 2 > voters.length ? "✓" : "✗"}`);
  } else text($("tree-facts"), S.status ? t("noStore") : "");
  $("tree").classList.toggle("down", S.apiDown);
  const pending = [...S.objs.pods.values()].filter((p) => !p.spec.nodeName && !p.metadata.deletionTimestamp && p.status?.phase === "Pending").sort(byName);
  let why = "";
  for (const p of pending) {
    const c = (p.status?.conditions || []).find((c) => c.type === "PodScheduled" && c.status === "False");
    if (c?.message) { why = c.message; break; }
  }
  text($("picker-facts"), pending.length ? `${pending.length} ${t("pending")}${why ? ": " + why : ""}` : t("pendingNone"));
  pods($("pending"), pending);
  const deps = [...S.objs.deployments.values()];
  const rss = [...S.objs.replicasets.values()].filter((r) => r.spec.replicas > 0);
  text($("captain-facts"), deps.map((d) => `Deployment ${d.metadata.name} ${d.status?.readyReplicas || 0}/${d.spec.replicas}`).slice(0, 6).join("\n") +
    (rss.length ? `\nReplicaSets: ${rss.length}` : ""));
}

// boards are the Nodes, or, for those who may not list them, the boards
// their pods are on.
function renderBoards(S) {
  const nodesForbidden = S.state.nodes === "forbidden";
  let boards = [...S.objs.nodes.values()];
  if (nodesForbidden) {
    const names = new Set([...S.objs.pods.values()].map((p) => p.spec.nodeName).filter(Boolean));
    boards = [...names].map((name) => ({ metadata: { name }, spec: {}, status: {}, noaccess: true }));
  }
  const isServer = (n) => "node-role.kubernetes.io/control-plane" in (n.metadata.labels || {});
  boards.sort((a, b) => (isServer(b) - isServer(a)) || a.metadata.name.localeCompare(b.metadata.name));
  const podsOf = new Map();
  for (const p of S.objs.pods.values()) {
    if (!p.spec.nodeName) continue;
    if (!podsOf.has(p.spec.nodeName)) podsOf.set(p.spec.nodeName, []);
    podsOf.get(p.spec.nodeName).push(p);
  }
  $("boards").classList.toggle("many", boards.length > manyBoards);
  keyed($("boards"), boards, (n) => n.metadata.name, (n, name) => {
    const nameBtn = el("button", "name");
    nameBtn.type = "button";
    nameBtn.dataset.kind = "nodes";
    nameBtn.dataset.key = name;
    const e = el("article", "board",
      el("div", "head", el("span", "led ready"), el("span", "led activity"), nameBtn),
      el("div", "meta arch"),
      el("div", "meter cpu", el("i")), el("div", "meter mem", el("i")),
      el("div", "squirrel", icon("squirrel"), el("span", "sq"), icon("runtime")),
      el("div", "plugins"),
      el("div", "pods"));
    e.querySelectorAll(".icon")[1].classList.add("runtime");
    e.setAttribute("role", "listitem");
    e.dataset.node = name;
    return e;
  }, (e, n) => {
    const name = n.metadata.name, up = n.noaccess || ready(n);
    const led = n.metadata.annotations?.["isle.dev/led-ready"] || (up ? "solid" : "off");
    e.classList.toggle("dark", !n.noaccess && !up);
    e.classList.toggle("server", isServer(n));
    e.classList.toggle("noaccess", !!n.noaccess);
    const rl = e.querySelector(".led.ready");
    rl.className = "led ready " + (!up ? "off" : /blink/.test(led) ? led : led === "off" ? "off" : "on");
    attr(rl, "title", led);
    text(e.querySelector(".name"), name);
    attr(e.querySelector(".name"), "aria-label", `${t("node")} ${name}: ${n.noaccess ? "" : up ? t("ready") : t("gone")}`);
    const info = n.status?.nodeInfo || {};
    text(e.querySelector(".arch"), n.noaccess ? t("noNodes") : `${info.architecture || ""} · ${isServer(n) ? "server" : "agent"}${up ? "" : " · " + t("gone")}`);
    text(e.querySelector(".sq"), `${t("squirrel")} · ${(info.containerRuntimeVersion || "").split(":")[0] || t("runtime")}`);
    text(e.querySelector(".plugins"), `${t("plugins")}: CNI ${n.spec.podCIDR || "—"} · CSI local-path`);
  }, (n) => `${n.metadata.resourceVersion}|${lang}|${n.noaccess}`, boardEls);
  for (const n of boards) {
    const e = boardEl(n.metadata.name);
    const use = S.metrics.get(n.metadata.name), alloc = n.status?.allocatable;
    const cpu = use && alloc ? cores(use.cpu) / cores(alloc.cpu) : 0, mem = use && alloc ? bytes(use.memory) / bytes(alloc.memory) : 0;
    e.querySelector(".cpu i").style.width = Math.min(100, cpu * 100).toFixed(0) + "%";
    e.querySelector(".mem i").style.width = Math.min(100, mem * 100).toFixed(0) + "%";
    attr(e.querySelector(".cpu"), "title", `${t("cpu")} ${(cpu * 100).toFixed(0)}%`);
    attr(e.querySelector(".mem"), "title", `${t("memory")} ${(mem * 100).toFixed(0)}%`);
    pods(e.querySelector(".pods"), (podsOf.get(n.metadata.name) || []).sort(byName));
  }
}

// pods draws pods as bubbles holding their containers as birds.
function pods(box, list) {
  keyed(box, list, keyOf, (p, key) => {
    const b = el("button", "pod new");
    b.type = "button";
    b.dataset.kind = "pods";
    b.dataset.key = key;
    b.setAttribute("role", "listitem");
    setTimeout(() => b.classList.remove("new"), 600);
    return b;
  }, (b, p) => {
    const phase = (p.status?.phase || "Pending").toLowerCase();
    const r = ready(p);
    b.className = `pod ${phase}${phase === "running" && !r ? " notready" : ""}${p.metadata.deletionTimestamp ? " deleting" : ""}${b.classList.contains("new") ? " new" : ""}`;
    const states = new Map((p.status?.containerStatuses || []).map((c) => [c.name, c]));
    b.replaceChildren(...p.spec.containers.map((c) => {
      const st = states.get(c.name)?.state || {};
      return el("i", "bird" + (st.running ? "" : st.terminated ? " terminated" : " waiting"));
    }), el("span", "pname", shortName(p)));
    attr(b, "aria-label", `${t("pod")} ${p.metadata.namespace}/${p.metadata.name}: ${p.status?.phase || "Pending"}${r ? ", " + t("ready") : ""}`);
    attr(b, "title", `${p.metadata.namespace}/${p.metadata.name} · ${p.status?.phase || "Pending"} · ${p.status?.podIP || ""}`);
  }, (p) => `${p.metadata.resourceVersion}|${lang}`, podEls);
}

// shortName is what a bubble says of its pod: the name without the
// ReplicaSet's hash when it has one.
function shortName(p) {
  const n = p.metadata.name, owner = p.metadata.ownerReferences?.[0]?.name;
  return owner && n.startsWith(owner + "-") && owner.lastIndexOf("-") > 0 ? owner.slice(0, owner.lastIndexOf("-")) + "-" + n.slice(owner.length + 1) : n;
}

function renderGates(S, slicesOf) {
  const ings = [...S.objs.ingresses.values()].sort(byName);
  keyed($("ingresses"), ings, keyOf, item("ingresses", "gate"), (e, ing) => {
    text(e.querySelector(".name"), `${t("ingress")} ${keyOf(ing)}`);
    const rules = [];
    for (const r of ing.spec.rules || []) for (const p of r.http?.paths || []) rules.push(`${r.host || "*"}${p.path || "/"} → ${p.backend.service?.name || "?"}:${p.backend.service?.port?.number || p.backend.service?.port?.name || ""}`);
    if (ing.spec.defaultBackend?.service) rules.push(`* → ${ing.spec.defaultBackend.service.name}`);
    text(e.querySelector(".sub"), rules.join("\n"));
  }, (o) => o.metadata.resourceVersion + lang, items, "ingresses|");
  const svcs = [...S.objs.services.values()].sort(byName);
  keyed($("services"), svcs, keyOf, (svc, key) => {
    const e = item("services", "totem")(svc, key);
    e.append(el("div", "names"));
    return e;
  }, (e, svc) => {
    text(e.querySelector(".name"), `${t("service")} ${keyOf(svc)}`);
    const ports = (svc.spec.ports || []).map((p) => `${p.port}/${p.protocol || "TCP"}`).join(", ");
    text(e.querySelector(".sub"), `${svc.spec.type || "ClusterIP"} ${svc.spec.clusterIP || ""} ${ports}\n${t("slice")}:`);
    const eps = endpoints(slicesOf.get(keyOf(svc)) || []);
    e.querySelector(".names").replaceChildren(...(eps.length ? eps.map((ep) => {
      const s = el("span", ep.ready ? "" : "notready", ep.name);
      s.title = ep.addr;
      return s;
    }) : [el("span", "notready", t("none"))]));
  }, (svc) => svc.metadata.resourceVersion + "|" + (slicesOf.get(keyOf(svc)) || []).map((s) => s.metadata.resourceVersion).join(",") + lang, items, "services|");
}

function endpoints(slices) {
  const out = [];
  for (const s of slices) for (const ep of s.endpoints || []) {
    out.push({ name: ep.targetRef?.name || ep.addresses?.[0] || "?", addr: (ep.addresses || []).join(","), ready: ep.conditions?.ready !== false, ns: s.metadata.namespace });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

// item makes a list entry of kind with an icon, a name and a line below.
function item(kind, iconName) {
  return (o, key) => {
    const b = el("button", "item", el("span", "title", icon(iconName), el("span", "name")), el("span", "sub"));
    b.type = "button";
    b.dataset.kind = kind;
    b.dataset.key = key;
    b.dataset[kind.replace(/s$/, "")] = key;
    b.setAttribute("role", "listitem");
    return b;
  };
}

function renderGround(S) {
  keyed($("pvcs"), [...S.objs.pvcs.values()].sort(byName), keyOf, item("pvcs", "slip"), (e, c) => {
    text(e.querySelector(".name"), keyOf(c));
    const phase = c.status?.phase || "Pending";
    const sub = e.querySelector(".sub");
    text(sub, `${phase}${c.spec.volumeName ? " → " + c.spec.volumeName : ""} · ${c.status?.capacity?.storage || c.spec.resources?.requests?.storage || ""}`);
    sub.className = "sub " + (phase === "Bound" ? "bound" : "pending-text");
  }, (o) => o.metadata.resourceVersion + lang, items, "pvcs|");
  keyed($("pvs"), [...S.objs.pvs.values()].sort(byName), keyOf, item("pvs", "warehouse"), (e, v) => {
    text(e.querySelector(".name"), v.metadata.name);
    const node = v.spec.nodeAffinity?.required?.nodeSelectorTerms?.[0]?.matchExpressions?.[0]?.values?.[0];
    text(e.querySelector(".sub"), `${v.status?.phase || ""} · ${v.spec.capacity?.storage || ""}${v.spec.claimRef ? " ← " + v.spec.claimRef.namespace + "/" + v.spec.claimRef.name : ""}${node ? " @ " + node : ""}`);
  }, (o) => o.metadata.resourceVersion + lang, items, "pvs|");
}

// lines are the lasting flows: orange roads Ingress → Service → ready
// pod, grey dashed Pod → PVC → PV, green Pod ⇄ PVC while the pod runs.
function lines(S, slicesOf) {
  const out = [];
  const svcEl = (ns, name) => itemEl("services", ns + "/" + name);
  // A road carries packets (moves) when its pod received traffic in the
  // boards' latest usage reports.
  const traffic = S.status?.traffic || {};
  const live = (key) => (traffic[key] || 0) >= liveBytesPerSecond;
  for (const ing of S.objs.ingresses.values()) {
    const ie = itemEl("ingresses", keyOf(ing));
    const names = new Set();
    for (const r of ing.spec.rules || []) for (const p of r.http?.paths || []) if (p.backend.service) names.add(p.backend.service.name);
    if (ing.spec.defaultBackend?.service) names.add(ing.spec.defaultBackend.service.name);
    for (const n of names) {
      const se = svcEl(ing.metadata.namespace, n);
      const eps = endpoints(slicesOf.get(ing.metadata.namespace + "/" + n) || []).filter((e) => e.ready);
      if (!ie || !se || !eps.length) continue;
      const any = eps.some((ep) => live(ing.metadata.namespace + "/" + ep.name));
      const road = any ? "orange live" : "orange";
      out.push([$("gatekeeper"), ie, road], [ie, se, road]);
      for (const ep of eps.slice(0, 12)) {
        const key = ing.metadata.namespace + "/" + ep.name, pe = podEl(key);
        if (pe) out.push([se, pe, live(key) ? "orange live" : "orange"]);
      }
    }
  }
  for (const p of S.objs.pods.values()) {
    if (out.length > maxLines) break;
    const pe = podEl(keyOf(p));
    for (const v of p.spec.volumes || []) {
      if (!v.persistentVolumeClaim) continue;
      const ce = itemEl("pvcs", p.metadata.namespace + "/" + v.persistentVolumeClaim.claimName);
      if (!pe || !ce) continue;
      out.push([pe, ce, p.status?.phase === "Running" ? "green" : "grey"]);
    }
  }
  for (const c of S.objs.pvcs.values()) {
    if (!c.spec.volumeName) continue;
    const ce = itemEl("pvcs", keyOf(c)), ve = itemEl("pvs", c.spec.volumeName);
    if (ce && ve) out.push([ce, ve, "grey"]);
  }
  // The selected Service's relation to its pods.
  if (S.selected?.kind === "services") {
    const [ns, name] = S.selected.key.split("/");
    const se = svcEl(ns, name);
    for (const ep of endpoints(slicesOf.get(S.selected.key) || [])) {
      const pe = podEl(ns + "/" + ep.name);
      if (se && pe) out.push([se, pe, "grey"]);
    }
  }
  return out.slice(0, maxLines);
}

function renderDetails(S) {
  const box = $("details"), sel = S.selected;
  let rows = null, title = "", del = false;
  if (sel) [title, rows, del] = details(S, sel);
  box.hidden = !rows;
  $("delete-pod").hidden = !(del && S.deleteAllowed === sel.key);
  if (!rows) return;
  text($("details-h"), title);
  const sig = JSON.stringify(rows) + lang;
  const dl = $("details-list");
  if (dl._sig === sig) return;
  dl._sig = sig;
  dl.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", "", k), el("dd", "", String(v ?? "—"))]));
}

function details(S, { kind, key }) {
  if (kind === "actor") {
    const st = S.status?.store;
    const facts = { tree: $("tree-facts"), picker: $("picker-facts"), captain: $("captain-facts") }[key];
    return [t(key), [[t("status"), facts?.textContent || ""], ...(key === "tree" && st ? st.members.map((m) => [m.name, `${m.api || ""} ${m.learner ? t("learner") : ""} ${m.match ? "match " + m.match : ""}`]) : [])], false];
  }
  const o = S.objs[kind]?.get(key);
  if (!o) return ["", null, false];
  switch (kind) {
    case "pods": {
      const cs = (o.status?.containerStatuses || []).map((c) => `${c.name} ${Object.keys(c.state || {})[0] || ""}${c.ready ? " ✓" : ""} (${c.image})`);
      const vols = (o.spec.volumes || []).map((v) => v.persistentVolumeClaim ? "PVC " + v.persistentVolumeClaim.claimName : v.name);
      return [`${t("pod")} ${key}`, [[t("node"), o.spec.nodeName], [t("phase"), o.status?.phase], [t("ip"), o.status?.podIP],
        [t("containers"), cs.join("; ")], [t("volumes"), vols.join(", ")]], true];
    }
    case "nodes": {
      const info = o.status?.nodeInfo || {};
      return [`${t("node")} ${key}`, [[t("status"), ready(o) ? t("ready") : t("gone")], [t("arch"), info.architecture],
        [t("runtime"), info.containerRuntimeVersion], [t("addresses"), (o.status?.addresses || []).map((a) => a.address).join(", ")],
        ["CNI", o.spec.podCIDR], [t("pods"), [...S.objs.pods.values()].filter((p) => p.spec.nodeName === key).length]], false];
    }
    case "services":
      return [`${t("service")} ${key}`, [[t("clusterIP"), o.spec.clusterIP], [t("ports"), (o.spec.ports || []).map((p) => `${p.port}→${p.targetPort}`).join(", ")],
        ["selector", JSON.stringify(o.spec.selector || {})]], false];
    case "ingresses":
      return [`${t("ingress")} ${key}`, [[t("class"), o.spec.ingressClassName], [t("rules"), $("ingresses").querySelector(`[data-key="${CSS.escape(key)}"] .sub`)?.textContent]], false];
    case "pvcs":
      return [`PVC ${key}`, [[t("status"), o.status?.phase], ["PV", o.spec.volumeName], [t("storageClass"), o.spec.storageClassName], [t("capacity"), o.status?.capacity?.storage]], false];
    case "pvs":
      return [`PV ${key}`, [[t("status"), o.status?.phase], [t("claim"), o.spec.claimRef ? o.spec.claimRef.namespace + "/" + o.spec.claimRef.name : ""],
        [t("capacity"), o.spec.capacity?.storage], [t("reclaim"), o.spec.persistentVolumeReclaimPolicy]], false];
  }
  return ["", null, false];
}

function cores(q) {
  if (!q) return 0;
  const m = /^([0-9.]+)(n|u|m)?$/.exec(q);
  if (!m) return 0;
  return parseFloat(m[1]) / ({ n: 1e9, u: 1e6, m: 1e3 }[m[2]] || 1);
}

function bytes(q) {
  if (!q) return 0;
  const m = /^([0-9.]+)([KMGTE]i?|[kmgte])?$/.exec(q);
  if (!m) return 0;
  const mult = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2]] || 1;
  return parseFloat(m[1]) * mult;
}
