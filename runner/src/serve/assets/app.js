// runner serve: the page. Everything that comes from a plan, an output or a model is put in
// the page as text (textContent, attribute values), never parsed as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const STATUSES = ["pending", "running", "succeeded", "failed", "skipped", "paused"];
// Above this many tasks a graph is drawn as its phases and parallel groups.
const DETAIL_LIMIT = 400;
// At most this many rows in the timeline.
const TIMELINE_ROWS = 300;
// At most this many events listed.
const EVENT_ROWS = 300;
// At most this many items drawn inside an expanded map; the task panel lists them all.
const MAP_ROWS = 40;
// A sub-plan's box: the height of a child task's row, of the caption naming the child plan,
// and the room left around a nested box and on the right for the child's edges.
const ROW_H = 20, CAPTION_H = 18, NEST = 6, ARCS = 18;

// An element with attributes (`on*` functions become listeners) and children (strings
// become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
}

function notice(text, error) {
  const box = document.getElementById("notice");
  box.textContent = text || "";
  box.className = error ? "error" : "";
}

async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({ message: response.statusText }));
  if (!response.ok) throw new Error(body.message || response.statusText);
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
}

function show(...children) {
  const main = document.getElementById("main");
  main.replaceChildren(...children);
}

function duration(from, to) {
  const ms = Date.parse(to) - Date.parse(from);
  if (!(ms >= 0)) return "";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  const m = Math.floor(s / 60);
  return m + " min " + Math.round(s - m * 60) + " s";
}

function badge(status) {
  return el("span", { class: "badge " + status }, status);
}

// ---- the runs -------------------------------------------------------------------------

let stop = () => {};

async function runsPage() {
  const status = el("select", { id: "filter-status" }, el("option", { value: "" }, "any status"),
    ["running", "paused", "interrupted", "succeeded", "partial", "failed", "cancelled"].map((s) => el("option", { value: s }, s)));
  const text = el("input", { id: "filter-text", placeholder: "filter by run or plan" });
  const body = el("tbody");
  const table = el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "run"), el("th", {}, "plan"), el("th", {}, "status"),
      el("th", { class: "num" }, "tasks"), el("th", {}, "started"), el("th", { class: "num" }, "duration"),
      el("th", { class: "num" }, "tokens"))),
    body);
  let rows = [];
  const draw = () => {
    const wanted = text.value.toLowerCase();
    body.replaceChildren(...rows
      .filter((r) => !status.value || r.status === status.value)
      .filter((r) => !wanted || r.id.toLowerCase().includes(wanted) || r.plan.toLowerCase().includes(wanted))
      .map((r) => el("tr", {},
        el("td", {}, el("a", { href: "#/run/" + encodeURIComponent(r.id) }, r.id)),
        el("td", {}, r.plan), el("td", {}, badge(r.status)),
        el("td", { class: "num" }, r.succeeded + "/" + r.tasks),
        el("td", {}, r.started.replace("T", " ").replace("Z", "")),
        el("td", { class: "num" }, duration(r.started, r.updated)),
        el("td", { class: "num" }, String(r.tokens.prompt + r.tokens.completion)))));
    if (!body.children.length) body.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no runs")));
  };
  status.addEventListener("change", draw);
  text.addEventListener("input", draw);
  show(el("h1", {}, "Runs"), el("div", { class: "filters" }, status, text), table);
  const load = async () => {
    try {
      rows = await api("/api/runs");
      draw();
      notice("");
    } catch (error) {
      notice(error.message, true);
    }
  };
  await load();
  const timer = setInterval(load, 3000);
  stop = () => clearInterval(timer);
}

// ---- graphs ---------------------------------------------------------------------------

// What the page knows of a run at one point, from a state the server sent: each task's
// status, the maps expanded so far (their items in order and how many have each status), the
// tasks skipped because their condition was false, and the child run each sub-plan task (or
// item) started.
function snapshot(state) {
  return {
    tasks: new Map(Object.entries(state ? state.tasks : {})),
    maps: new Map(Object.entries(state && state.maps ? state.maps : {})),
    byCondition: new Set(state && state.skipped_by_condition ? state.skipped_by_condition : []),
    reused: new Set(state && state.reused ? state.reused : []),
    children: new Map(Object.entries(state && state.children ? state.children : {})),
  };
}

// Adds what a stream message (or a state fetched again) says to a snapshot.
function absorb(snap, update) {
  for (const [task, status] of Object.entries(update.tasks)) snap.tasks.set(task, status);
  for (const [map, items] of Object.entries(update.maps || {})) snap.maps.set(map, items);
  for (const task of update.skipped_by_condition || []) snap.byCondition.add(task);
  for (const task of update.reused || []) snap.reused.add(task);
  for (const [task, run] of Object.entries(update.children || {})) snap.children.set(task, run);
}

// A link to run `run`, for a sub-plan's child or a child's parent.
function runLink(run) {
  return el("a", { href: "#/run/" + encodeURIComponent(run), "data-run": run }, run);
}

function statusIn(snap, id) {
  return snap.tasks.get(id) || "pending";
}

// A map's status: its own once it has one; while it waits for its items, that of the items
// furthest along.
function mapStatus(snap, id) {
  const own = statusIn(snap, id);
  const map = snap.maps.get(id);
  if (own !== "pending" || !map) return own;
  return ["running", "paused", "failed"].find((s) => map.counts[s]) || own;
}

// How many items have each status: `9 succeeded, 2 running, 1 failed`.
function countsText(map) {
  if (!map.items.length) return "no items";
  return STATUSES.filter((s) => map.counts[s]).map((s) => map.counts[s] + " " + s).join(", ");
}

// A map in one line: `read ×12: 9 succeeded, 2 running, 1 failed`.
function mapSummary(id, map) {
  return id + " ×" + map.items.length + ": " + countsText(map);
}

// What a task node says under its id: its agent, or what kind of step it is.
function detailOf(task) {
  switch (task.kind) {
    case "review": return "human review";
    case "gate": return "gate" + (task.agent ? ": " + task.agent : "");
    case "plan": return "plan: " + (task.plan || "");
    case "expand": return "planned at run time" + (task.agent ? " by " + task.agent : "") + (task.max_tasks ? ", ≤ " + task.max_tasks + " tasks" : "");
    default: return task.agent || "";
  }
}

// The tasks of a sub-plan drawn in its box: the first MAP_ROWS, by phase then plan order.
function childRows(graph) {
  return graph.tasks.map((_, i) => i).sort((a, b) => graph.tasks[a].phase - graph.tasks[b].phase || a - b).slice(0, MAP_ROWS);
}

// The height of a sub-plan's rows in its box: a caption, a row per task (a nested sub-plan's
// row holds its own box), and a line for the tasks not drawn.
function subplanHeight(graph) {
  let h = CAPTION_H;
  for (const i of childRows(graph)) {
    const sub = graph.tasks[i].subplan;
    h += ROW_H + 4 + (sub ? subplanHeight(sub) + NEST : 0);
  }
  return h + (graph.tasks.length > MAP_ROWS ? ROW_H : 0);
}

// The rows of sub-plan `graph` (the plan at `path`) from (x, y), `w` wide: each child task a
// row with its id and agent, its edges arcs on the rows' right, a nested sub-plan framed with
// its own rows. They are the child plan's tasks, not the run's: they carry no status.
function drawSubplan(graph, path, x, y, w) {
  const parts = [svg("text", { x: x + 2, y: y + 12, class: "grouplabel" }, clip("plan " + graph.name + (path ? " · " + path : ""), w / 6.5))];
  const rowY = new Map();
  let cy = y + CAPTION_H;
  for (const i of childRows(graph)) {
    const task = graph.tasks[i];
    rowY.set(i, cy);
    const label = task.id + " · " + detailOf(task);
    const row = svg("g", { class: "child-task " + task.kind, "data-child-task": task.id },
      svg("rect", { x, y: cy, width: w, height: ROW_H, rx: task.kind === "review" ? 0 : 4 }),
      svg("title", {}, label + (task.when ? ", when " + task.when : "") + (task.map ? ", " + mapSource(task.map) : "")),
      svg("text", { x: x + 6, y: cy + 14 }, clip(label, (w - 12) / 6.8)));
    if (task.subplan) {
      const inner = subplanHeight(task.subplan);
      parts.push(svg("rect", { class: "subplan-frame", x: x - 2, y: cy - 2, width: w + 4, height: ROW_H + inner + NEST, rx: 6 }));
      parts.push(row, drawSubplan(task.subplan, task.plan, x + NEST, cy + ROW_H + 2, w - NEST - ARCS));
      cy += ROW_H + inner + NEST + 4;
    } else {
      parts.push(row);
      cy += ROW_H + 4;
    }
  }
  if (graph.tasks.length > MAP_ROWS) parts.push(svg("text", { x: x + 6, y: cy + 12, class: "grouplabel" }, "… and " + (graph.tasks.length - MAP_ROWS) + " more tasks"));
  graph.tasks.forEach((task, i) => {
    if (!rowY.has(i)) return;
    for (const d of task.deps) {
      if (!rowY.has(d)) continue;
      const y1 = rowY.get(d) + ROW_H / 2, y2 = rowY.get(i) + ROW_H / 2, bend = x + w + Math.min(4 + (y2 - y1) / 10, ARCS - 2);
      parts.unshift(svg("path", { class: "edge child-edge", d: `M${x + w},${y1} C${bend},${y1} ${bend},${y2} ${x + w},${y2}` }));
    }
  });
  return svg("g", { class: "subplan-rows" }, parts);
}

// What a map runs over before it has expanded, as the manifest says.
function mapSource(source) {
  if (source.items !== undefined) return "map of " + source.items + (source.items === 1 ? " item" : " items");
  return "map over " + source.expr + (source.max_items ? " (≤ " + source.max_items + ")" : "");
}

// Draws a graph into `box`; returns { paint(snapshot), select(id) }. `onPick(id)` is called
// with a task id when a task is clicked, and with a list of ids when a block is.
function drawGraph(box, graph, onPick) {
  return graph.tasks.length > DETAIL_LIMIT ? drawBlocks(box, graph, onPick) : drawTasks(box, graph, onPick);
}

// Tasks of each phase, grouped by parallel group (ungrouped first), in plan order.
function columns(graph) {
  const phases = Array.from({ length: graph.phases }, () => new Map());
  graph.tasks.forEach((task, i) => {
    const groups = phases[task.phase];
    const key = task.group === null || task.group === undefined ? "" : task.group;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(i);
  });
  return phases.map((groups) => [...groups.entries()].sort((a, b) => (a[0] === "" ? -1 : b[0] === "" ? 1 : 0)));
}

// Every task a node; a map (`for_each`) one stacked node with its item counts, which a click
// expands to show its first MAP_ROWS items as their own nodes inside it (and collapses again).
function drawTasks(box, graph, onPick) {
  const hasMaps = graph.tasks.some((t) => t.map), hasSubplans = graph.tasks.some((t) => t.subplan);
  const W = hasSubplans ? 260 : hasMaps ? 220 : 140, H = 34, MAP_H = 50, ITEM_H = 20, GAP_X = 40, PAD = 16, TOP = 28;
  const GAP_Y = hasSubplans ? 20 : 10;
  const critical = new Set(graph.critical);
  const criticalEdges = new Set(graph.critical.slice(1).map((t, k) => graph.critical[k] + ">" + t));
  const expanded = new Set();
  let snap = snapshot(null);
  let nodes = new Map();
  let layout = null;
  let selected = null;

  // The items drawn inside an expanded map, and how many more it has.
  const itemsOf = (id) => {
    const map = snap.maps.get(id);
    const items = map ? map.items : [];
    return { shown: items.slice(0, MAP_ROWS), more: Math.max(items.length - MAP_ROWS, 0), known: !!map };
  };
  // The height of a task's node (a map's with its items when open), then with its sub-plan's box.
  const nodeHeight = (task) => {
    if (!task.map) return H;
    if (!expanded.has(task.id)) return MAP_H;
    const { shown, more } = itemsOf(task.id);
    return MAP_H + 4 + Math.max(shown.length, 1) * (ITEM_H + 4) + (more ? ITEM_H : 0);
  };
  const heightOf = (task) => nodeHeight(task) + (task.subplan ? 6 + subplanHeight(task.subplan) : 0);
  // What decides the layout: which maps are open and how many items each draws.
  const layoutKey = () => [...expanded].sort().map((id) => id + ":" + itemsOf(id).shown.length).join(",");

  const build = () => {
    layout = layoutKey();
    nodes = new Map();
    const place = [];
    let height = 0;
    const groupsLayer = svg("g"), edgesLayer = svg("g"), nodesLayer = svg("g"), labels = svg("g");
    columns(graph).forEach((groups, p) => {
      const x = PAD + p * (W + GAP_X);
      labels.append(svg("text", { x, y: 16, class: "phaselabel" }, "phase " + (p + 1)));
      let y = TOP;
      for (const [group, tasks] of groups) {
        const grouped = group !== "";
        if (grouped) y += 14;
        const top = y;
        for (const i of tasks) {
          place[i] = { x, y };
          y += heightOf(graph.tasks[i]) + GAP_Y;
        }
        if (grouped) {
          groupsLayer.append(svg("rect", { class: "group", x: x - 6, y: top - 16, width: W + 12, height: y - top + 10, rx: 6 }));
          groupsLayer.append(svg("text", { class: "grouplabel", x: x - 2, y: top - 4 }, "parallel: " + group));
          y += 10;
        }
      }
      height = Math.max(height, y);
    });
    graph.tasks.forEach((task, i) => {
      const { x, y } = place[i];
      const h = task.map ? MAP_H : H;
      for (const d of task.deps) {
        const from = place[d], fromH = graph.tasks[d].map ? MAP_H : H;
        const x1 = from.x + W, y1 = from.y + fromH / 2, x2 = x, y2 = y + h / 2, mid = (x1 + x2) / 2;
        edgesLayer.append(svg("path", {
          class: "edge" + (criticalEdges.has(d + ">" + i) ? " critical" : ""),
          d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
        }));
      }
      nodesLayer.append(task.map ? mapNode(task, i, x, y) : taskNode(task, i, x, y));
      if (task.subplan) groupsLayer.append(subplanBox(task, x, y));
    });
    const width = PAD * 2 + graph.phases * (W + GAP_X) - GAP_X;
    box.replaceChildren(svg("svg", { width, height: height + PAD, class: "graph-svg" }, labels, groupsLayer, edgesLayer, nodesLayer));
    if (selected !== null) select(selected);
  };

  const nodeClass = (task, i) => "node " + task.kind + (critical.has(i) ? " critical" : "") + (task.when ? " conditional" : "");
  const taskNode = (task, i, x, y) => {
    const shape = task.kind === "gate"
      ? svg("polygon", { points: `${x + 10},${y} ${x + W - 10},${y} ${x + W},${y + H / 2} ${x + W - 10},${y + H} ${x + 10},${y + H} ${x},${y + H / 2}`, class: "s-pending" })
      : svg("rect", { x, y, width: W, height: H, rx: task.kind === "review" ? 0 : 6, class: "s-pending" });
    const about = task.id + (task.agent ? " (" + task.agent + ")" : "") + " — " + task.kind + (task.when ? ", when " + task.when : "");
    const title = svg("title", {}, about);
    const plain = detailOf(task);
    const detail = svg("text", { x: x + 8, y: y + 28, class: "grouplabel" }, clip(plain, W / 6.5));
    const node = svg("g", {
      class: nodeClass(task, i), "data-task": task.id, "data-status": "pending",
      onclick: () => onPick(task.id),
    }, shape, title, svg("text", { x: x + 8, y: y + 14 }, clip(task.id, W / 7.3)), detail);
    nodes.set(task.id, { node, shape, kind: "task", title, about, detail, plain, link: null, child: null });
    return node;
  };
  const itemNode = (map, id, x, y) => {
    const shape = svg("rect", { x, y, width: W - 16, height: ITEM_H, rx: 4, class: "s-pending" });
    const title = svg("title", {}, id);
    const node = svg("g", {
      class: "node item", "data-task": id, "data-item-of": map, "data-status": "pending",
      onclick: (e) => { e.stopPropagation(); onPick(id); },
    }, shape, title, svg("text", { x: x + 6, y: y + 14 }, clip(id, (W - 16) / 7.3)));
    nodes.set(id, { node, shape, kind: "item", title, about: id, detail: null, plain: "", link: null, child: null });
    return node;
  };
  const mapNode = (task, i, x, y) => {
    const open = expanded.has(task.id);
    const toggle = () => {
      if (open) expanded.delete(task.id);
      else expanded.add(task.id);
      build();
      paintNodes();
      onPick(task.id);
    };
    const parts = [];
    if (open) {
      parts.push(svg("rect", { class: "map-frame", x: x - 4, y: y - 4, width: W + 8, height: nodeHeight(task) + 8, rx: 8 }));
    } else {
      parts.push(svg("rect", { class: "map-stack", x: x + 5, y: y - 5, width: W, height: MAP_H, rx: 6 }));
    }
    const shape = svg("rect", { x, y, width: W, height: MAP_H, rx: 6, class: "s-pending" });
    const head = svg("text", { x: x + 8, y: y + 14 });
    const detail = svg("text", { x: x + 8, y: y + 29, class: "grouplabel" });
    const bars = svg("g");
    const title = svg("title");
    const header = svg("g", { class: "map-head", onclick: toggle }, shape, title, head, detail, bars);
    parts.push(header);
    if (open) {
      const { shown, more, known } = itemsOf(task.id);
      let iy = y + MAP_H + 4;
      if (!known) parts.push(svg("text", { x: x + 12, y: iy + 14, class: "grouplabel" }, "no items until it runs"));
      for (const id of shown) {
        parts.push(itemNode(task.id, id, x + 8, iy));
        iy += ITEM_H + 4;
      }
      if (more) parts.push(svg("text", { x: x + 12, y: iy + 12, class: "grouplabel" }, "… and " + more + " more: see the task panel"));
    }
    const node = svg("g", {
      class: nodeClass(task, i) + " map", "data-task": task.id, "data-map": task.id, "data-status": "pending",
      "data-expanded": String(open),
    }, parts);
    nodes.set(task.id, { node, shape, kind: "map", task, head, detail, bars, title, painted: null });
    return node;
  };

  // A sub-plan task's box: a frame around its node and the child plan's rows under it; a click
  // on it opens the task.
  const subplanBox = (task, x, y) => {
    const top = y + nodeHeight(task) + 6;
    return svg("g", { class: "subplan", "data-subplan": task.id, onclick: () => onPick(task.id) },
      svg("rect", { class: "subplan-frame", x: x - 6, y: y - 6, width: W + 12, height: heightOf(task) + 12, rx: 8 }),
      drawSubplan(task.subplan, task.plan, x + NEST, top, W - NEST - ARCS));
  };

  // A link to the child run a sub-plan task or item started, at its node's right, once the
  // run store has it.
  const paintLink = (id, n) => {
    const child = snap.children.get(id) || null;
    if (n.child === child) return;
    n.child = child;
    if (n.link) n.link.remove();
    n.link = null;
    if (!child) return;
    const x = Number(n.shape.getAttribute("x")) + Number(n.shape.getAttribute("width")) - 6;
    const y = Number(n.shape.getAttribute("y")) + 14;
    n.link = svg("a", { class: "child-link", href: "#/run/" + encodeURIComponent(child), "data-child-run": child, onclick: (e) => e.stopPropagation() },
      svg("title", {}, "its child run: " + child), svg("text", { x, y, "text-anchor": "end" }, "run ↗"));
    n.node.append(n.link);
  };

  const paintMap = (id, n, byCondition) => {
    const map = snap.maps.get(id);
    const summary = map ? mapSummary(id, map)
      : id + ": " + (byCondition ? "skipped: condition false" : mapSource(n.task.map) + ", not expanded yet");
    if (n.painted === summary) return;
    n.painted = summary;
    n.node.setAttribute("data-counts", summary);
    n.head.textContent = clip(id + (map ? " ×" + map.items.length : " · map"), W / 7.3 - 2) + (expanded.has(id) ? " ▾" : " ▸");
    n.detail.textContent = clip(map ? countsText(map) : byCondition ? "skipped: condition false" : mapSource(n.task.map), W / 6.5);
    n.title.textContent = summary + " — click to " + (expanded.has(id) ? "collapse" : "expand");
    const parts = [];
    if (map && map.items.length) {
      const x = Number(n.shape.getAttribute("x")), y = Number(n.shape.getAttribute("y"));
      parts.push(svg("rect", { x: x + 7.5, y: y + 35.5, width: W - 15, height: 9, class: "bar-track" }));
      let bx = x + 8;
      for (const s of STATUSES) {
        const count = map.counts[s] || 0;
        if (!count) continue;
        const w = (W - 16) * count / map.items.length;
        parts.push(svg("rect", { x: bx, y: y + 36, width: Math.max(w, 0.5), height: 8, class: "bar s-" + s }));
        bx += w;
      }
    }
    n.bars.replaceChildren(...parts);
  };

  const paintNodes = () => {
    for (const [id, n] of nodes) {
      const status = n.kind === "map" ? mapStatus(snap, id) : statusIn(snap, id);
      if (n.node.getAttribute("data-status") !== status) {
        n.node.setAttribute("data-status", status);
        n.shape.setAttribute("class", "s-" + status);
      }
      const byCondition = snap.byCondition.has(id);
      if (snap.reused.has(id) !== n.node.hasAttribute("data-reused")) {
        if (snap.reused.has(id)) n.node.setAttribute("data-reused", "");
        else n.node.removeAttribute("data-reused");
      }
      if (n.kind === "map") paintMap(id, n, byCondition);
      else paintLink(id, n);
      if ((n.node.getAttribute("data-skip") === "condition") !== byCondition) {
        if (byCondition) n.node.setAttribute("data-skip", "condition");
        else n.node.removeAttribute("data-skip");
        if (n.kind === "map") continue;
        n.title.textContent = n.about + (byCondition ? " — skipped: condition false" : "");
        if (n.detail) n.detail.textContent = byCondition ? "skipped: condition false" : clip(n.plain, W / 6.5);
      }
    }
  };

  const select = (id) => {
    if (selected !== null && nodes.has(selected)) nodes.get(selected).node.classList.remove("selected");
    selected = id;
    if (nodes.has(id)) nodes.get(id).node.classList.add("selected");
  };

  build();
  return {
    paint(next) {
      snap = next;
      if (layoutKey() !== layout) build();
      paintNodes();
    },
    select,
  };
}

function clip(text, n) {
  n = Math.floor(n);
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// A large graph: one block per phase and parallel group, with a bar of its tasks' statuses.
function drawBlocks(box, graph, onPick) {
  const W = 220, H = 52, GAP_X = 70, GAP_Y = 12, PAD = 16, TOP = 28;
  const blocks = [];
  const blockOf = new Int32Array(graph.tasks.length);
  const labels = svg("g"), edgesLayer = svg("g"), nodesLayer = svg("g");
  let height = 0;
  columns(graph).forEach((groups, p) => {
    const x = PAD + p * (W + GAP_X);
    labels.append(svg("text", { x, y: 16, class: "phaselabel" }, "phase " + (p + 1)));
    let y = TOP;
    for (const [group, tasks] of groups) {
      const b = blocks.length;
      for (const i of tasks) blockOf[i] = b;
      blocks.push({ x, y, group, phase: p, tasks, bars: null });
      y += H + GAP_Y;
    }
    height = Math.max(height, y);
  });
  const seen = new Set();
  graph.tasks.forEach((task, i) => {
    for (const d of task.deps) {
      const key = blockOf[d] + ">" + blockOf[i];
      if (blockOf[d] === blockOf[i] || seen.has(key)) continue;
      seen.add(key);
      const a = blocks[blockOf[d]], b = blocks[blockOf[i]];
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mid = (x1 + x2) / 2;
      edgesLayer.append(svg("path", { class: "edge", d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}` }));
    }
  });
  for (const block of blocks) {
    const name = (block.group === "" ? "ungrouped" : "parallel: " + block.group);
    const bars = svg("g");
    block.bars = bars;
    nodesLayer.append(svg("g", {
      class: "node block", "data-block": block.phase + ":" + block.group,
      onclick: () => onPick(block.tasks.map((i) => graph.tasks[i].id)),
    },
      svg("rect", { class: "frame", x: block.x, y: block.y, width: W, height: H, rx: 6 }),
      svg("title", {}, name + " — " + block.tasks.length + " tasks"),
      svg("text", { x: block.x + 8, y: block.y + 15 }, clip(name, 30)),
      svg("text", { x: block.x + 8, y: block.y + 29, class: "grouplabel" }, block.tasks.length + " tasks"),
      bars));
  }
  const width = PAD * 2 + graph.phases * (W + GAP_X) - GAP_X;
  box.replaceChildren(svg("svg", { width, height: height + PAD, class: "graph-svg" }, labels, edgesLayer, nodesLayer));
  return {
    paint(snap) {
      for (const block of blocks) {
        const counts = new Map();
        for (const i of block.tasks) {
          const task = graph.tasks[i];
          const s = task.map ? mapStatus(snap, task.id) : statusIn(snap, task.id);
          counts.set(s, (counts.get(s) || 0) + 1);
        }
        let x = block.x + 8;
        const parts = [];
        for (const s of STATUSES) {
          const n = counts.get(s) || 0;
          if (!n) continue;
          const w = (W - 16) * n / block.tasks.length;
          parts.push(svg("rect", { x, y: block.y + 36, width: Math.max(w, 0.5), height: 9, class: "s-" + s },
            svg("title", {}, s + ": " + n)));
          x += w;
        }
        block.bars.replaceChildren(...parts);
      }
    },
    select() {},
  };
}

// ---- the timeline ---------------------------------------------------------------------

// The attempts of the first `upto` events: a bar from each dispatch to its result.
function drawTimeline(box, events, upto, onPick) {
  const attempts = [];
  const open = new Map();
  const rows = new Map();
  let first = null, last = null;
  for (let k = 0; k < upto; k++) {
    const e = events[k];
    if (e.time === undefined) e.time = Date.parse(e.at);
    const t = e.time;
    if (first === null) first = t;
    last = t;
    if (e.type === "TaskDispatched") {
      if (!rows.has(e.task)) rows.set(e.task, rows.size);
      const attempt = { task: e.task, attempt: e.attempt, start: t, end: null, result: "running" };
      open.set(e.task + "#" + e.attempt, attempt);
      attempts.push(attempt);
    } else if (e.type === "TaskSucceeded" || e.type === "TaskFailed") {
      const attempt = open.get(e.task + "#" + e.attempt);
      if (attempt) {
        attempt.end = t;
        attempt.result = e.type === "TaskSucceeded" ? "succeeded" : "failed";
      }
    }
  }
  if (!attempts.length) {
    box.replaceChildren(el("p", { class: "muted" }, "no attempts yet"));
    return;
  }
  const LEFT = 170, WIDTH = 700, ROW = 16;
  const span = Math.max(last - first, 1);
  const shown = Math.min(rows.size, TIMELINE_ROWS);
  const parts = [];
  for (const [task, row] of rows) {
    if (row >= shown) break;
    parts.push(svg("text", { x: 4, y: row * ROW + 12 }, clip(task, 24)));
  }
  for (const a of attempts) {
    const row = rows.get(a.task);
    if (row >= shown) continue;
    const x = LEFT + (a.start - first) / span * WIDTH;
    const w = Math.max(((a.end === null ? last : a.end) - a.start) / span * WIDTH, 2);
    parts.push(svg("rect", {
      x, y: row * ROW + 2, width: w, height: ROW - 4, rx: 2, class: "s-" + a.result,
      "data-task": a.task, onclick: () => onPick(a.task),
    }, svg("title", {}, a.task + " attempt " + a.attempt + ": " + a.result + " (" + duration(new Date(a.start).toISOString(), new Date(a.end === null ? last : a.end).toISOString()) + ")")));
  }
  const note = rows.size > shown ? el("p", { class: "muted" }, "the first " + shown + " of " + rows.size + " tasks dispatched") : null;
  box.replaceChildren(svg("svg", { width: LEFT + WIDTH + 10, height: shown * ROW + 4 }, parts), note || "");
}

// ---- one run --------------------------------------------------------------------------

async function runPage(id) {
  let view;
  try {
    view = await api("/api/runs/" + encodeURIComponent(id));
  } catch (error) {
    show(el("h1", {}, "Run " + id), el("p", { class: "error" }, error.message));
    return;
  }
  const events = view.events;
  const live = snapshot(view.state);
  const graphTask = new Map(view.graph.tasks.map((t) => [t.id, t]));
  // Whether a task (or an item of a map) starts a child run, whose link the state then has.
  const startsChild = (task) => {
    const node = graphTask.get(task) || graphTask.get(task.replace(/\[\d+\]$/, ""));
    return !!node && (node.kind === "plan" || node.kind === "expand");
  };
  let liveState = view.state;
  // What the run was forecast to take beside what it took when the page loaded.
  function forecastText(f) {
    const figure = (name, a, show) =>
      name + " " + show(a.actual) + " of " + show(a.expected) + " expected (" + (a.worst === null ? "unbounded" : show(a.worst)) + " at worst)";
    const parts = [figure("tokens", f.tokens, String)];
    if (f.cost) parts.push(figure("cost", f.cost, (x) => x.toFixed(4) + " " + f.currency));
    parts.push(figure("time", f.duration_ms, (ms) => (ms / 1000).toFixed(1) + " s"));
    return "forecast: " + parts.join(" · ");
  }
  let position = events.length;
  let picked = null;
  let source = null;

  const statusBadge = el("span", { id: "run-status" });
  const tokens = el("span", { class: "muted" });
  const waitingBox = el("div", { id: "waiting" });
  const graphBox = el("div", { class: "panel graph", id: "graph" });
  const timelineBox = el("div", { class: "panel timeline", id: "timeline" });
  const side = el("div", { class: "panel side", id: "task-panel" }, el("p", { class: "muted" }, "click a task"));
  const eventsBox = el("div", { class: "panel events", id: "events" });
  const slider = el("input", { type: "range", id: "replay", min: 0, max: events.length, value: events.length, step: 1 });
  const where = el("span", { id: "replay-position" });
  const retryFrom = el("button", { id: "retry-from", disabled: true }, "Retry from task");
  const cancelButton = el("button", { id: "cancel", hidden: true, onclick: () => act("cancel", {}) }, "Cancel");
  const resumeButton = el("button", { id: "resume", hidden: true, onclick: () => act("resume", {}) }, "Resume");
  // Cancel and Resume only where the server takes them now (`state.actions`): never on a run
  // that has ended, and Resume only on one no live process drives.
  const offer = (actions) => {
    cancelButton.hidden = !(actions && actions.cancel);
    resumeButton.hidden = !(actions && actions.resume);
  };

  const act = async (action, body) => {
    try {
      const done = await post("/api/runs/" + encodeURIComponent(id) + "/" + action, body);
      notice(done.message);
      if (done.run !== id) location.hash = "#/run/" + encodeURIComponent(done.run);
      else refreshState();
    } catch (error) {
      notice(error.message, true);
    }
  };
  retryFrom.addEventListener("click", () => picked && act("retry", { from: picked }));

  show(
    el("div", { class: "runhead" },
      el("h1", {}, "Run " + id), statusBadge, el("span", {}, "plan ", el("b", {}, view.graph.name)), tokens,
      view.forecast ? el("span", { id: "forecast", class: "muted" }, forecastText(view.forecast)) : null,
      view.parent ? el("span", { id: "parent-run" }, "a sub-plan of run ", runLink(view.parent.run), ", task " + view.parent.task) : null),
    el("div", { class: "actions" },
      cancelButton,
      resumeButton,
      el("button", { id: "retry", onclick: () => act("retry", {}) }, "Retry failed"),
      retryFrom),
    waitingBox,
    el("div", { class: "replay" }, el("label", { for: "replay" }, "Replay"), slider, where),
    el("div", { class: "layout" },
      el("div", {}, graphBox, legendBar(), el("h2", {}, "Timeline"), timelineBox, el("h2", {}, "Events"), eventsBox),
      side));

  const pick = (what) => {
    if (Array.isArray(what)) return showBlock(what);
    picked = what;
    retryFrom.disabled = false;
    retryFrom.textContent = "Retry from " + clip(what, 20);
    graph.select(what);
    showTask();
  };
  const showBlock = (ids) => side.replaceChildren(el("h2", {}, ids.length + " tasks"), taskList(ids, currentStatuses(), pick));
  let graph = drawGraph(graphBox, view.graph, pick);
  let replayed = null;

  // The snapshot shown: the live one, or the replayed one while the slider is back.
  const currentStatuses = () => (position === events.length || !replayed ? live : replayed);

  const showTask = async () => {
    if (!picked) return;
    const task = picked;
    const at = position === events.length ? "" : "?at=" + position;
    try {
      const t = await api("/api/runs/" + encodeURIComponent(id) + "/tasks/" + encodeURIComponent(task) + at);
      if (picked !== task) return;
      side.replaceChildren(taskPanel(t, { snap: currentStatuses(), pick, node: graphTask.get(t.id) }));
    } catch (error) {
      side.replaceChildren(el("h2", {}, task), el("p", { class: "muted" }, error.message));
    }
  };

  const paint = () => {
    const upto = position;
    const state = upto === events.length ? liveState : null;
    graph.paint(currentStatuses());
    statusBadge.replaceChildren(badge(state ? state.status : "replay"));
    if (state) tokens.textContent = (state.tokens.prompt + state.tokens.completion) + " tokens";
    where.textContent = upto === events.length ? "live · " + upto + " events" : "after event " + upto + " of " + events.length;
    drawTimeline(timelineBox, events, upto, pick);
    const from = Math.max(0, upto - EVENT_ROWS);
    eventsBox.replaceChildren(...events.slice(from, upto).map((e) => el("div", {}, e.line)));
    eventsBox.scrollTop = eventsBox.scrollHeight;
    drawWaiting(state);
    offer(liveState.actions);
  };

  const drawWaiting = (state) => {
    if (!state || !state.waiting.length) {
      waitingBox.replaceChildren();
      return;
    }
    waitingBox.replaceChildren(...state.waiting.map((w) => {
      const comment = el("input", { placeholder: w.question ? "your answer" : "comment (optional)", "data-task": w.task });
      const buttons = w.question
        ? [el("button", { class: "primary", "data-action": "answer", "data-task": w.task, onclick: () => act("answer", { task: w.task, text: comment.value, resume: true }) }, "Answer and resume")]
        : [el("button", { class: "primary", "data-action": "approve", "data-task": w.task, onclick: () => act("approve", { task: w.task, comment: comment.value || null, resume: true }) }, "Approve"),
           el("button", { "data-action": "reject", "data-task": w.task, onclick: () => act("reject", { task: w.task, comment: comment.value || null, resume: true }) }, "Reject")];
      const asks = w.question ? " asks:" : w.tool ? " wants to call " + w.tool.tool + " with:" : " waits for a review decision";
      const detail = w.question || (w.tool && (w.tool.arguments + (w.tool.reason ? "\n\nits reason: " + w.tool.reason : "")));
      return el("div", { class: "waiting" },
        el("b", {}, w.task), asks,
        detail ? el("div", { class: "question" }, detail) : null,
        el("div", { class: "actions" }, comment, buttons));
    }));
  };

  let pending = null;
  slider.addEventListener("input", () => {
    position = Number(slider.value);
    if (position === events.length) {
      replayed = null;
      paint();
      showTask();
      return;
    }
    clearTimeout(pending);
    pending = setTimeout(async () => {
      const at = position;
      try {
        const state = await api("/api/runs/" + encodeURIComponent(id) + "/state?at=" + at);
        if (at !== position) return;
        replayed = snapshot(state);
        paint();
        statusBadge.replaceChildren(badge(state.status), el("span", { class: "muted" }, " (replay)"));
        showTask();
      } catch (error) {
        notice(error.message, true);
      }
    }, 60);
  });

  const refreshState = async () => {
    try {
      liveState = await api("/api/runs/" + encodeURIComponent(id) + "/state");
      absorb(live, liveState);
      offer(liveState.actions);
      if (position === events.length) paint();
      recheckLater();
      lookForChildren();
    } catch (error) {
      notice(error.message, true);
    }
  };

  // A run that a process drives can be resumed once that process is gone (it exits after a
  // pause, or crashes), which adds no event to the log: look again, less often each time.
  let recheck = null;
  let recheckDelay = 1000;
  const recheckLater = () => {
    clearTimeout(recheck);
    const actions = liveState.actions;
    if (!actions || !actions.cancel || actions.resume) {
      recheckDelay = 1000;
      return;
    }
    recheck = setTimeout(refreshState, recheckDelay);
    recheckDelay = Math.min(recheckDelay * 2, 30000);
  };
  recheckLater();

  // A sub-plan task runs before its child run is in the store, and the child's progress adds
  // nothing to this run's log: while one runs without a link, look again every second.
  let childCheck = null;
  const lookForChildren = () => {
    clearTimeout(childCheck);
    const missing = [...live.tasks].some(([t, s]) => s === "running" && startsChild(t) && !live.children.has(t));
    if (missing) childCheck = setTimeout(refreshState, 1000);
  };
  lookForChildren();

  let frame = null;
  let taskChanged = false;
  const schedulePaint = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = null;
      paint();
      if (taskChanged) showTask();
      taskChanged = false;
    });
  };
  paint();

  const last = () => (events.length ? events[events.length - 1].seq : 0);
  source = new EventSource("/api/runs/" + encodeURIComponent(id) + "/stream?after=" + last());
  source.onmessage = (message) => {
    const update = JSON.parse(message.data);
    if (update.replanned) {
      source.close();
      clearTimeout(recheck);
      clearTimeout(childCheck);
      runPage(id);
      return;
    }
    const following = position === events.length;
    for (const e of update.events) events.push(e);
    absorb(live, update);
    taskChanged = taskChanged || (picked !== null && (picked in update.tasks || picked in (update.maps || {})));
    if (Object.keys(update.tasks).some((t) => startsChild(t) && !live.children.has(t))) refreshState();
    const changed = liveState.status !== update.status;
    liveState = Object.assign({}, liveState, { status: update.status, tokens: update.tokens });
    slider.max = events.length;
    if (following) {
      position = events.length;
      slider.value = position;
      schedulePaint();
    } else {
      where.textContent = "after event " + position + " of " + events.length;
    }
    if (changed || update.status === "paused") refreshState();
  };
  source.addEventListener("failure", (message) => notice(JSON.parse(message.data), true));
  stop = () => {
    source.close();
    clearTimeout(recheck);
    clearTimeout(childCheck);
  };
}

function legendBar() {
  return el("div", { class: "legend" }, STATUSES.map((s) => el("span", {}, svgSwatch(s), s)),
    el("span", {}, svg("svg", { width: 12, height: 12, class: "condition-swatch" }, svg("rect", { x: 1, y: 1, width: 10, height: 10, rx: 2 })), "skipped: condition false"),
    el("span", {}, svg("svg", { width: 12, height: 12, class: "reused-swatch" }, svg("rect", { x: 1, y: 1, width: 10, height: 10, rx: 2 })), "reused: output from an earlier run"),
    el("span", { class: "muted" }, "a stacked node is a map: click it for its items"));
}

function svgSwatch(status) {
  return svg("svg", { width: 12, height: 12 }, svg("rect", { width: 12, height: 12, rx: 2, class: "s-" + status }));
}

function field(title, text) {
  if (text === null || text === undefined || text === "") return null;
  return [el("h2", {}, title), el("pre", {}, text)];
}

// A filterable list of tasks, each with its status, that opens a task when clicked.
function taskList(ids, snap, pick) {
  const filter = el("input", { placeholder: "filter tasks" });
  const list = el("div", { class: "task-list" });
  const draw = () => {
    const wanted = filter.value.toLowerCase();
    list.replaceChildren(...ids.filter((t) => t.toLowerCase().includes(wanted)).slice(0, 200).map((t) =>
      el("div", {}, el("a", { href: "#", "data-task": t, onclick: (e) => { e.preventDefault(); pick(t); } }, t), " ", badge(statusIn(snap, t)),
        snap.children.has(t) ? [" run ", runLink(snap.children.get(t))] : null)));
  };
  filter.addEventListener("input", draw);
  draw();
  return el("div", {}, filter, list);
}

// What a task panel says of a map, an item or a condition.
function dynamicPart(t, { snap, pick, node }) {
  const parts = [];
  if (t.reused_from) parts.push(el("div", { class: "reused" }, "reused from the cache: run ", runLink(t.reused_from.run), ", attempt " + t.reused_from.attempt + " (key " + t.reused_from.key.slice(0, 12) + "…)"));
  if (t.skipped_by_condition) parts.push(el("div", { class: "condition" }, "skipped: condition false" + (t.when ? " (when: " + t.when + ")" : "")));
  else if (t.when) parts.push(el("div", { class: "muted" }, "runs only when " + t.when));
  if (t.map) parts.push(el("div", {}, "an item of map ", el("a", { href: "#", onclick: (e) => { e.preventDefault(); pick(t.map); } }, t.map)));
  const child = snap.children.get(t.id);
  if (child) parts.push(el("div", { class: "child-run" }, "its child run: ", runLink(child)));
  else if (node && node.kind === "plan" && !node.map) parts.push(el("div", { class: "muted" }, "runs " + node.plan + " as a child run once it starts"));
  const map = snap.maps.get(t.id);
  if (map) parts.push(el("h2", {}, "Items"), el("div", { class: "map-summary" }, mapSummary(t.id, map)), taskList(map.items, snap, pick));
  else if (node && node.map) parts.push(el("div", { class: "map-summary" }, mapSource(node.map) + ", not expanded yet"));
  return parts;
}

function taskPanel(t, context) {
  // A map waits for its items too: they are listed under Items, not as what it runs after.
  const map = context.snap.maps.get(t.id);
  const items = new Set(map ? map.items : []);
  const after = t.depends_on.filter((d) => !items.has(d));
  return el("div", {},
    el("h2", {}, t.id, " ", badge(t.status)),
    el("div", { class: "muted" }, t.kind + (t.agent ? " · " + t.agent : "") + (after.length ? " · after " + after.join(", ") : "")),
    dynamicPart(t, context),
    el("div", {}, "attempts: " + t.attempts + " · failures: " + t.failures + " · tokens: " + t.tokens.prompt + " prompt, " + t.tokens.completion + " completion"),
    field("Input", t.input),
    field("Output", t.output),
    field("Error", t.error),
    field("Question", t.question),
    t.answers.length ? field("Answers", t.answers.join("\n---\n")) : null,
    field("Review feedback", t.feedback),
    t.verification.length ? field("Verification failures", t.verification.join("\n---\n")) : null,
    el("h2", {}, "Events"),
    el("div", { class: "events" }, t.events.map((e) => el("div", {}, e.seq + " " + e.at.slice(11, 23) + " " + e.type + (e.attempt ? " #" + e.attempt : "")))));
}

// ---- a plan before it runs ------------------------------------------------------------

function planPage() {
  const path = el("input", { id: "plan-path", placeholder: "path under the served folder, e.g. examples/offline.yaml", size: 50 });
  const text = el("textarea", { id: "plan-text", placeholder: "or paste a manifest here" });
  const out = el("div", { id: "plan-report" });
  const open = async (request) => {
    try {
      out.replaceChildren(planReport(await request()));
      notice("");
    } catch (error) {
      out.replaceChildren(el("p", { class: "error" }, error.message));
    }
  };
  const byPath = () => open(() => api("/api/plan?path=" + encodeURIComponent(path.value)));
  path.addEventListener("keydown", (e) => e.key === "Enter" && byPath());
  show(el("h1", {}, "Plan preview"),
    el("div", { class: "filters" }, path, el("button", { id: "open-path", onclick: byPath }, "Open")),
    text, el("div", {}, el("button", { id: "open-text", onclick: () => open(() => post("/api/plan", { text: text.value })) }, "Preview pasted plan")),
    out);
  const wanted = new URLSearchParams(location.hash.split("?")[1] || "").get("path");
  if (wanted) {
    path.value = wanted;
    byPath();
  }
}

function planReport(report) {
  const lines = report.text.split("\n");
  const items = lines.map((line) => el("li", {}, line || " "));
  const flag = (line) => {
    items.forEach((item) => item.classList.remove("flag"));
    const item = items[line - 1];
    if (item) {
      item.classList.add("flag");
      item.scrollIntoView({ block: "center" });
    }
  };
  const problem = (kind, code, message, line, help) => el("li", { class: kind, onclick: () => flag(line) },
    "line " + line + ": ", el("b", {}, kind), " [" + code + "] " + message, help ? el("div", { class: "muted" }, "help: " + help) : null);
  const graphBox = el("div", { class: "panel graph" });
  const parts = [
    el("h2", {}, report.name, " ", badge(report.valid ? "succeeded" : "failed"), " ", report.valid ? "score " + report.score.toFixed(1) + "/10" : "has errors and cannot run"),
    el("ul", { class: "problems", id: "problems" },
      report.diagnostics.map((d) => problem(d.severity, d.code, d.message, d.line, d.help)),
      report.findings.map((f) => problem(f.severity, f.code, f.message, f.line, f.help))),
    graphBox,
    el("h2", {}, "Manifest"),
    el("ol", { class: "source panel" }, items),
  ];
  if (report.graph) drawGraph(graphBox, report.graph, () => {}).paint(snapshot(null));
  else graphBox.append(el("p", { class: "muted" }, "no graph: the plan has errors"));
  return el("div", {}, parts);
}

// ---- routing --------------------------------------------------------------------------

function route() {
  stop();
  stop = () => {};
  notice("");
  const hash = location.hash || "#/";
  if (hash.startsWith("#/run/")) runPage(decodeURIComponent(hash.slice(6)));
  else if (hash.startsWith("#/plan")) planPage();
  else runsPage();
}

window.addEventListener("hashchange", route);
route();
