// A small client of the Kubernetes API the page is served with: lists
// and watches as client-go's reflector does (list, then watch from the
// list's resourceVersion; list again when the watch's history is gone),
// with the credentials of whoever opened the page.

const retryMin = 500, retryMax = 5000;

export class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function getJSON(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { Accept: "application/json", ...(init.headers || {}) } });
  if (!res.ok) {
    let msg = res.statusText;
    try { msg = (await res.json()).message || msg; } catch { /* not a Status */ }
    throw new APIError(res.status, msg);
  }
  return res.json();
}

// follow keeps handlers up to date with the objects at path (a list URL):
// onReset(items) after every list, onEvent(type, object) for each change,
// onState("ok" | "down" | "forbidden", error) when reachability changes.
// It goes on until signal aborts.
export async function follow(path, { onReset, onEvent, onState, signal }) {
  let delay = retryMin, state = "";
  const setState = (s, err) => { if (s !== state) { state = s; onState?.(s, err); } };
  while (!signal?.aborted) {
    try {
      let items = [], cont = "", rv = "";
      do {
        const list = await getJSON(`${path}${path.includes("?") ? "&" : "?"}limit=500${cont ? "&continue=" + encodeURIComponent(cont) : ""}`, { signal });
        items = items.concat(list.items || []);
        cont = list.metadata?.continue || "";
        rv = list.metadata?.resourceVersion || "";
      } while (cont);
      onReset(items);
      setState("ok");
      delay = retryMin;
      while (!signal?.aborted) {
        const next = await watch(path, rv, onEvent, signal);
        if (next === null) break; // history gone: list again
        rv = next;
      }
    } catch (err) {
      if (signal?.aborted) return;
      if (err instanceof APIError && (err.status === 403 || err.status === 404)) {
        setState("forbidden", err);
        await sleep(30000, signal);
        continue;
      }
      setState("down", err);
    }
    await sleep(delay, signal);
    delay = Math.min(delay * 2, retryMax);
  }
}

// watch follows one watch from rv on a WebSocket (a browser holds at
// most six HTTP/1.1 connections to a server, and the map follows more
// kinds than that); it returns the last resourceVersion seen, or null
// when the server says that version is too old (410).
function watch(path, rv, onEvent, signal) {
  const url = new URL(`${path}${path.includes("?") ? "&" : "?"}watch=1&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion=${encodeURIComponent(rv)}`, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let opened = false, gone = false, failed = null;
    const abort = () => ws.close();
    signal?.addEventListener("abort", abort, { once: true });
    ws.onopen = () => { opened = true; };
    ws.onmessage = (m) => {
      if (gone || failed) return;
      const ev = JSON.parse(m.data);
      if (ev.type === "ERROR") {
        if (ev.object?.code === 410) gone = true;
        else failed = new APIError(ev.object?.code || 500, ev.object?.message || "watch error");
        ws.close();
        return;
      }
      rv = ev.object?.metadata?.resourceVersion || rv;
      if (ev.type !== "BOOKMARK") onEvent(ev.type, ev.object);
    };
    ws.onclose = () => {
      signal?.removeEventListener("abort", abort);
      if (gone) resolve(null);
      else if (failed) reject(failed);
      else if (!opened) reject(new APIError(0, "the watch could not be opened"));
      else resolve(rv);
    };
  });
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
