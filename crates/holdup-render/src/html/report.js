"use strict";
// Filter box: hide report rows that do not contain the text.
function filterRows(text) {
  const t = text.toLowerCase();
  for (const tr of document.querySelectorAll("table.rows tbody tr")) {
    tr.style.display = tr.textContent.toLowerCase().includes(t) ? "" : "none";
  }
}

// Flame graph of [name, value, class, children] nodes: click zooms into a
// frame (the root zooms out), the search box highlights matching frames.
const ROW = 17;
// Two views of one box: the on- and off-CPU flame graph, and the critical
// path (each wait another thread ended replaced by what its chain did).
const data = JSON.parse(document.getElementById("flame-data").textContent);
let tree = data.flame;
const box = document.getElementById("flame");
const info = document.getElementById("flame-info");
let zoomed = [tree];
let search = "";

function depth(n) {
  let d = 0;
  for (const c of n[3]) d = Math.max(d, depth(c));
  return d + 1;
}

function draw() {
  box.textContent = "";
  const focus = zoomed[zoomed.length - 1];
  const width = box.clientWidth || 1000;
  let matched = 0;
  const add = (n, x, w, y, path) => {
    if (w * width < 1) return;
    const d = document.createElement("div");
    d.className = "c" + n[2];
    d.style.left = x * width + "px";
    d.style.width = w * width + "px";
    d.style.top = y * ROW + "px";
    d.textContent = n[0];
    d.title = n[0] + " (" + (100 * n[1] / tree[1]).toFixed(2) + "%)";
    if (search && n[0].toLowerCase().includes(search)) { d.classList.add("hit"); }
    d.onclick = () => { zoomed = path; draw(); };
    d.onmouseover = () => { info.textContent = d.title; };
    box.appendChild(d);
    let cx = x;
    for (const c of n[3]) {
      const cw = w * c[1] / n[1];
      add(c, cx, cw, y + 1, path.concat([c]));
      cx += cw;
    }
  };
  const count = (n) => {
    if (search && n[0].toLowerCase().includes(search)) { matched += n[1]; return; }
    for (const c of n[3]) count(c);
  };
  // Ancestors of the zoomed frame span the full width, dimmed.
  zoomed.slice(0, -1).forEach((n, i) => {
    add([n[0], n[1], n[2], []], 0, 1, i, zoomed.slice(0, i + 1));
    box.lastChild && box.lastChild.classList.add("dim");
  });
  add(focus, 0, 1, zoomed.length - 1, zoomed);
  box.style.height = (zoomed.length - 1 + depth(focus)) * ROW + "px";
  count(tree);
  if (search) {
    info.textContent = "matched " + (100 * matched / tree[1]).toFixed(2) + "% for \"" + search + "\"";
  }
}

document.getElementById("flame-search").addEventListener("input", (e) => {
  search = e.target.value.toLowerCase();
  draw();
});
function view(critical) {
  if (critical && !data.critical) {
    info.textContent = "No critical path: " + data.critical_missing;
    return;
  }
  tree = critical ? data.critical : data.flame;
  zoomed = [tree];
  document.getElementById("view-flame").classList.toggle("on", !critical);
  document.getElementById("view-critical").classList.toggle("on", critical);
  draw();
}
document.getElementById("view-flame").addEventListener("click", () => view(false));
document.getElementById("view-critical").addEventListener("click", () => view(true));
document.getElementById("flame-reset").addEventListener("click", () => { zoomed = [tree]; draw(); });
document.getElementById("filter").addEventListener("input", (e) => filterRows(e.target.value));
window.addEventListener("resize", draw);
// A link can carry a search: report.html#search=malloc
const fromLink = new URLSearchParams(location.hash.slice(1)).get("search");
if (fromLink) {
  document.getElementById("flame-search").value = fromLink;
  search = fromLink.toLowerCase();
}
// A link to the critical path opens that view: report.html#critical-path,
// or #view=critical (with a search: #view=critical&search=fdatasync).
const wanted = new URLSearchParams(location.hash.slice(1)).get("view");
if (wanted === "critical" || location.hash === "#critical-path") {
  view(true);
} else {
  draw();
}
document.body.dataset.ready = "1";
