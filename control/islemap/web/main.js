// The island's map: follows the cluster through the Kubernetes API and
// draws it as the seed's picture (see index.html for the regions).

import { follow, getJSON, sleep } from "./api.js";
import { setLang, t, langOf } from "./i18n.js";
import { Flows } from "./flows.js";
import { render, boardEl, podEl, counterEl, onRedraw } from "./view.js";

const S = {
  status: null, // the last /isle/map/status answered
  apiDown: false, // no API server answered the last status
  objs: {}, // kind → Map key → object
  state: {}, // kind → ok | down | forbidden
  synced: new Set(), // kinds listed once: their later changes play flows
  metrics: new Map(), // board → {cpu, memory} in use
  selected: null, // {kind, key}
  ticker: [],
  // stats: the page's own work, for the bench: renders and their time.
  stats: { renders: 0, renderMs: 0, maxRenderMs: 0 },
};
window.isleMap = S; // for tests and the bench: what the page holds

// The kinds the map follows. ns: namespaced (followed in each namespace
// the user may list, or across all).
const kinds = [
  { kind: "nodes", path: "/api/v1/nodes", cluster: "nodes" },
  { kind: "pvs", path: "/api/v1/persistentvolumes", cluster: "persistentvolumes" },
  { kind: "pods", ns: true, path: "/api/v1/", res: "pods" },
  { kind: "services", ns: true, path: "/api/v1/", res: "services" },
  { kind: "slices", ns: true, path: "/apis/discovery.k8s.io/v1/", res: "endpointslices" },
  { kind: "ingresses", ns: true, path: "/apis/networking.k8s.io/v1/", res: "ingresses" },
  { kind: "pvcs", ns: true, path: "/api/v1/", res: "persistentvolumeclaims" },
  { kind: "deployments", ns: true, path: "/apis/apps/v1/", res: "deployments" },
  { kind: "replicasets", ns: true, path: "/apis/apps/v1/", res: "replicasets" },
];
for (const k of kinds) S.objs[k.kind] = new Map();

const keyOf = (o) => (o.metadata.namespace ? o.metadata.namespace + "/" : "") + o.metadata.name;
const $ = (id) => document.getElementById(id);
let flows, dirty = false;

function changed() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(() => {
    dirty = false;
    const t0 = performance.now();
    render(S, flows);
    S.renderedAt = performance.now();
    S.stats.renders++;
    S.stats.renderMs += S.renderedAt - t0;
    S.stats.maxRenderMs = Math.max(S.stats.maxRenderMs, S.renderedAt - t0);
  });
}

function announce(text) {
  $("announce").textContent = text;
  S.ticker.unshift(new Date().toLocaleTimeString() + "  " + text);
  S.ticker.length = Math.min(S.ticker.length, 6);
}

// onEvent keeps the kind's objects and plays what the change shows.
function onEvent(kind, type, obj) {
  const m = S.objs[kind], key = keyOf(obj), old = m.get(key);
  if (type === "DELETED") m.delete(key); else m.set(key, obj);
  if (S.synced.has(kind)) play(kind, type, obj, old);
  changed();
}

// The writer of a change: the field manager of the latest managedFields
// entry. isle's controllers write as kube-controller-manager.
function writer(obj, old) {
  const mf = obj.metadata.managedFields || [];
  let latest = null;
  for (const e of mf) if (!latest || (e.time || "") >= (latest.time || "")) latest = e;
  if (old && old.metadata.generation === obj.metadata.generation && (obj.metadata.generation || 0) > 0) return $("captain"); // status only
  if (latest && /controller-manager|scheduler/.test(latest.manager || "")) return $("captain");
  if (obj.metadata.ownerReferences?.some((r) => r.controller)) return $("captain");
  return $("whistle");
}

function counter() {
  return counterEl(S.status?.server) || document.querySelector(".counter");
}

function podReady(p) {
  return (p.status?.conditions || []).some((c) => c.type === "Ready" && c.status === "True");
}

function play(kind, type, obj, old) {
  const api = counter(), tree = $("tree");
  const name = obj.metadata.name;
  switch (kind) {
    case "pods": {
      const node = obj.spec.nodeName, board = node && boardEl(node);
      const squirrel = board?.querySelector(".squirrel");
      if (board) activity(board);
      if (type === "ADDED") {
        flows.play([obj.metadata.ownerReferences ? $("captain") : $("whistle"), api, tree, api, node ? squirrel : $("picker")]);
        announce(t("wrote", obj.metadata.ownerReferences ? t("captain") : t("whistle"), "Pod " + name));
      } else if (type === "MODIFIED" && node && !old?.spec.nodeName) {
        flows.play([$("picker"), api, tree, api, squirrel]);
        announce(t("scheduled", name, node));
      } else if (type === "MODIFIED" && node && old && JSON.stringify(old.status) !== JSON.stringify(obj.status)) {
        const running = obj.status.phase === "Running" && old.status?.phase !== "Running";
        if (running) {
          flows.play([squirrel, board?.querySelector(".runtime"), podEl(keyOf(obj))]);
          announce(t("started", name));
        }
        flows.play([squirrel, api, tree], running ? 800 : 0);
      } else if (type === "DELETED" || (obj.metadata.deletionTimestamp && !old?.metadata.deletionTimestamp)) {
        flows.play([api, tree, api, node ? squirrel : $("captain")]);
      }
      break;
    }
    case "nodes": {
      const was = old && nodeReady(old), is = nodeReady(obj);
      if (old && was !== is) announce(is ? t("boardBack", name) : t("boardDark", name));
      if (old && JSON.stringify(old.status?.conditions) === JSON.stringify(obj.status?.conditions) &&
        JSON.stringify(old.metadata.annotations) === JSON.stringify(obj.metadata.annotations)) return;
      flows.play([boardEl(name)?.querySelector(".squirrel"), api, tree]);
      break;
    }
    case "slices":
      flows.play([$("captain"), api, tree, api, $("roads")]);
      break;
    case "services":
      flows.play([writer(obj, old), api, tree, api, $("captain")]);
      flows.play([tree, api, $("roads")], 3 * 420);
      break;
    case "ingresses":
      flows.play([writer(obj, old), api, tree, api, $("gatekeeper")]);
      break;
    default: // deployments, replicasets, pvcs, pvs
      flows.play([writer(obj, old), api, tree, api, $("captain")]);
      if (type === "ADDED") announce(t("wrote", writer(obj, old) === $("whistle") ? t("whistle") : t("captain"), `${kindName[kind]} ${name}`));
  }
}

const kindName = { deployments: "Deployment", replicasets: "ReplicaSet", pvcs: "PersistentVolumeClaim", pvs: "PersistentVolume" };

export function nodeReady(n) {
  return (n.status?.conditions || []).some((c) => c.type === "Ready" && c.status === "True");
}

function activity(board) {
  const led = board.querySelector(".led.activity");
  if (!led) return;
  led.classList.add("on");
  clearTimeout(led._off);
  led._off = setTimeout(() => led.classList.remove("on"), 250);
}

// followAll starts following every kind in the user's scope.
function followAll(status, signal) {
  for (const k of kinds) {
    if (k.cluster && !(status.cluster || []).includes(k.cluster)) {
      S.state[k.kind] = "forbidden";
      continue;
    }
    const scopes = !k.ns ? [k.path] : status.allNamespaces ? [k.path + k.res] :
      (status.namespaces || []).map((ns) => `${k.path}namespaces/${encodeURIComponent(ns)}/${k.res}`);
    if (!scopes.length) S.state[k.kind] = "forbidden";
    let listed = 0;
    for (const path of scopes) {
      const ns = k.ns && !status.allNamespaces ? path.split("/namespaces/")[1].split("/")[0] : null;
      let synced = false;
      follow(path, {
        signal,
        onReset(items) {
          const m = S.objs[k.kind];
          for (const key of [...m.keys()]) if (ns === null || key.startsWith(ns + "/")) m.delete(key);
          for (const o of items) m.set(keyOf(o), o);
          if (!synced && ++listed === scopes.length) S.synced.add(k.kind);
          synced = true;
          changed();
        },
        onEvent: (type, obj) => onEvent(k.kind, type, obj),
        onState(state) { S.state[k.kind] = state; changed(); },
      });
    }
  }
}

const statusWait = 3000;

// pollStatus asks the API server for the store and the user's scope.
async function pollStatus(signal) {
  let following = false;
  while (!signal.aborted) {
    try {
      // A server that is gone may not even refuse: give up after a while.
      const st = await getJSON("status", { signal: AbortSignal.any([signal, AbortSignal.timeout(statusWait)]) });
      S.status = st;
      S.apiDown = false;
      S.statusAt = Date.now();
      if (!following) {
        following = true;
        followAll(st, signal);
        if ((st.cluster || []).includes("metrics")) pollMetrics(signal);
        $("who").textContent = `${t("user")} ${st.user} · ${st.allNamespaces ? t("allNs") : t("nsOnly") + " " + (st.namespaces || []).join(", ")}`;
      }
    } catch (err) {
      if (signal.aborted) return;
      S.apiDown = true;
    }
    changed();
    await sleep(2000, signal);
  }
}

async function pollMetrics(signal) {
  while (!signal.aborted) {
    try {
      const list = await getJSON("/apis/metrics.k8s.io/v1beta1/nodes", { signal });
      S.metrics = new Map(list.items.map((m) => [m.metadata.name, m.usage]));
      changed();
    } catch { /* not served, not allowed, or down: the meters wait */ }
    await sleep(5000, signal);
  }
}

// select shows an element's details (kind, key), or none.
// opener is the element focused when the details opened; closing them
// gives it the focus back.
let opener = null;

export function select(kind, key) {
  if (kind && !S.selected) opener = document.activeElement;
  if (!kind && S.selected && opener?.isConnected) requestAnimationFrame(() => opener.focus());
  S.selected = kind ? { kind, key } : null;
  S.deleteAllowed = null;
  changed();
  if (kind === "pods") mayDelete(key);
  if (kind) requestAnimationFrame(() => $("details-close").focus());
}

// mayDelete asks whether the user may delete the pod at key; the delete
// button shows only then.
async function mayDelete(key) {
  const [namespace, name] = key.split("/");
  try {
    const r = await getJSON("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview",
        spec: { resourceAttributes: { namespace, name, verb: "delete", resource: "pods" } } }),
    });
    if (r.status?.allowed && S.selected?.key === key) { S.deleteAllowed = key; changed(); }
  } catch { /* no button */ }
}

async function deleteSelected() {
  const sel = S.selected;
  if (sel?.kind !== "pods") return;
  const [ns, name] = sel.key.split("/");
  try {
    await getJSON(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`, { method: "DELETE" });
    announce(t("deleted") + " " + name);
  } catch (err) {
    announce(`${name}: ${err.message}`);
  }
}

function init() {
  const saved = localStorage.getItem("isle-map-lang");
  const lang = saved || ((navigator.language || "").startsWith("zh") ? "zh-Hant" : "en");
  setLang(lang);
  $("lang").addEventListener("click", () => {
    const next = langOf() === "en" ? "zh-Hant" : "en";
    localStorage.setItem("isle-map-lang", next);
    setLang(next);
    $("lang").textContent = t("lang");
    $("lang").lang = next === "en" ? "zh-Hant" : "en";
    changed();
  });
  $("lang").textContent = t("lang");
  $("details-close").addEventListener("click", () => select(null));
  $("delete-pod").addEventListener("click", deleteSelected);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") select(null); });
  $("island").addEventListener("click", (e) => {
    const el = e.target.closest("[data-kind]");
    if (el) select(el.dataset.kind, el.dataset.key);
  });
  flows = new Flows($("flows"), $("island"));
  onRedraw(changed);
  S.flows = flows;
  new ResizeObserver(changed).observe($("island"));
  const ctl = new AbortController();
  pollStatus(ctl.signal);
  for (const id of ["whistle", "tree", "picker", "captain", "gatekeeper", "roads"]) {
    $(id).dataset.kind = "actor";
    $(id).dataset.key = id;
  }
}

init();
