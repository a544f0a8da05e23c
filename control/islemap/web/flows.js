// The five flows drawn over the map: blue arrows that run once along a
// chain of the map's elements (a write through the API server and who
// hears of it), and lines that stay while what they show is true: orange
// packets' roads, grey dashed API relations, green volume reads and writes.
//
// Arrows advance on animation frames, every step's positions read
// together before anything is drawn, so a burst of changes lays the page
// out once a frame, not once an arrow.

const svgNS = "http://www.w3.org/2000/svg";
// At most this many blue arrows run at once; past it the elements still
// flash but no more arrows start (a burst of a hundred changes stays smooth).
const maxRunning = 24;
const stepMs = 420;
// An element flashes at most this often.
const flashEvery = 300;

export class Flows {
  constructor(svg, box) {
    this.svg = svg;
    this.box = box;
    this.played = 0;
    // log: the last arrows played, each its elements' names joined by
    // ">" (tests and the bench read it).
    this.log = [];
    this.pending = []; // {els, step, at}: arrows running or waiting to
    this.arrows = []; // {path, until}: segments drawn
    this.flashes = []; // {el, at}
    this.frame = 0;
    this.rects = null; // this frame's element rectangles
    this.stats = { ticks: 0, tickMs: 0 };
    this.lines = document.createElementNS(svgNS, "g");
    this.arrowsG = document.createElementNS(svgNS, "g");
    const defs = document.createElementNS(svgNS, "defs");
    for (const [id, orient] of [["arrow-green", "auto"], ["arrow-green-start", "auto-start-reverse"]]) {
      const m = document.createElementNS(svgNS, "marker");
      for (const [k, v] of Object.entries({ id, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "5", markerHeight: "5", orient })) m.setAttribute(k, v);
      const p = document.createElementNS(svgNS, "path");
      p.setAttribute("d", "M0 0L10 5L0 10z");
      p.setAttribute("fill", "#2e9d4f");
      m.append(p);
      defs.append(m);
    }
    svg.append(defs, this.lines, this.arrowsG);
  }

  // resize fits the drawing to the map.
  resize() {
    const w = this.box.scrollWidth, h = this.box.scrollHeight;
    if (this.svg.getAttribute("width") != w) this.svg.setAttribute("width", w);
    if (this.svg.getAttribute("height") != h) this.svg.setAttribute("height", h);
  }

  // measure forgets the rectangles read before: the page changed.
  measure() { this.rects = null; }

  center(el) {
    if (!this.rects) this.rects = new Map([[this.box, this.box.getBoundingClientRect()]]);
    let r = this.rects.get(el);
    if (!r) { r = el.getBoundingClientRect(); this.rects.set(el, r); }
    if (!r.width && !r.height) return null;
    const b = this.rects.get(this.box);
    return [r.left - b.left + r.width / 2, r.top - b.top + r.height / 2];
  }

  path(a, b, bend = 0.18) {
    if (!a.isConnected || !b.isConnected) return null;
    const pa = this.center(a), pb = this.center(b);
    if (!pa || !pb) return null;
    const [x1, y1] = pa, [x2, y2] = pb;
    const mx = (x1 + x2) / 2 - (y2 - y1) * bend, my = (y1 + y2) / 2 + (x2 - x1) * bend;
    return `M${x1.toFixed(1)} ${y1.toFixed(1)}Q${mx.toFixed(1)} ${my.toFixed(1)} ${x2.toFixed(1)} ${y2.toFixed(1)}`;
  }

  // play runs a blue arrow along chain (elements, nulls skipped), one
  // step after another, after delay ms; each element reached flashes.
  play(chain, delay = 0) {
    const els = chain.filter(Boolean);
    this.played++;
    this.log.push(els.map(nameOf).join(">"));
    if (this.log.length > 500) this.log.splice(0, 100);
    const at = performance.now() + delay;
    if (els.length >= 2 && this.pending.length < maxRunning) this.pending.push({ els, step: 0, at });
    else els.forEach((el, i) => this.flashes.push({ el, at: at + i * stepMs }));
    this.kick();
  }

  kick() {
    if (!this.frame) this.frame = requestAnimationFrame((now) => this.tick(now));
  }

  // tick moves the arrows on: expired segments go, due steps are read,
  // then drawn.
  tick(now) {
    const t0 = performance.now();
    this.frame = 0;
    this.arrows = this.arrows.filter((a) => a.until > now || (a.path.remove(), false));
    const due = this.pending.filter((f) => f.at <= now);
    const draw = [];
    for (const f of due) {
      flash(f.els[f.step], now);
      const d = f.step + 1 < f.els.length ? this.path(f.els[f.step], f.els[f.step + 1]) : null;
      if (d) draw.push(d);
      f.step++;
      f.at += stepMs;
    }
    this.pending = this.pending.filter((f) => f.step < f.els.length);
    this.flashes = this.flashes.filter((x) => x.at > now || (flash(x.el, now), false));
    for (const d of draw) {
      const p = document.createElementNS(svgNS, "path");
      p.setAttribute("d", d);
      p.setAttribute("pathLength", "100");
      p.setAttribute("class", "flow blue");
      this.arrowsG.append(p);
      this.arrows.push({ path: p, until: now + stepMs });
    }
    this.rects = null;
    if (this.pending.length || this.arrows.length || this.flashes.length) this.kick();
    this.stats.ticks++;
    this.stats.tickMs += performance.now() - t0;
  }

  // draw replaces the lasting lines: each [from, to, kind] with kind
  // orange, grey or green.
  draw(lines) {
    this.resize();
    const frag = document.createDocumentFragment();
    for (const [a, b, kind] of lines) {
      const d = this.path(a, b, kind === "grey" ? 0.08 : 0.15);
      if (!d) continue;
      const p = document.createElementNS(svgNS, "path");
      p.setAttribute("d", d);
      p.setAttribute("class", "flow " + kind);
      frag.append(p);
    }
    this.lines.replaceChildren(frag);
  }
}

// nameOf names an element of a flow: its id, or what it stands for.
function nameOf(el) {
  const d = el.dataset;
  if (el.id) return el.id;
  if (d.server) return "counter:" + d.server;
  if (d.kind === "pods") return "pod:" + d.key;
  const board = el.closest(".board")?.dataset.node;
  if (board) return (el.classList.contains("squirrel") ? "squirrel:" : el.classList.contains("runtime") ? "runtime:" : "board:") + board;
  return d.key || el.className;
}

// A flash is a pulse of the element's size: a transform, which the
// compositor animates without painting the page again (a shadow would
// repaint it every frame of every flash).
const flashFrames = [{ transform: "scale(1.08)" }, { transform: "scale(1)" }];
const reduced = matchMedia("(prefers-reduced-motion: reduce)").matches;

// flash marks an element as having just acted.
export function flash(el, now = performance.now()) {
  if (!el || reduced || !el.isConnected || now - (el._flashAt || -1e9) < flashEvery) return;
  el._flashAt = now;
  el.animate(flashFrames, { duration: 700, easing: "ease-out" });
}
