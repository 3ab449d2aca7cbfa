// `python -m harness serve`'s index (inlined by harness/html/index.py): filter the runs table.
(function () {
  "use strict";
  const runs = JSON.parse(document.getElementById("runs-data").textContent);
  const rows = document.querySelectorAll("#runs tbody tr");
  const q = document.getElementById("q"), verdict = document.getElementById("verdict");
  const shown = document.getElementById("shown");
  const fields = ["path", "scenario", "subject", "backend", "seed", "verdict", "date"];
  function apply() {
    const words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    let n = 0;
    runs.forEach((r, i) => {
      const text = fields.map((f) => String(r[f]).toLowerCase()).join(" ");
      const keep = (!verdict.value || r.verdict === verdict.value) && words.every((w) => text.includes(w));
      rows[i].classList.toggle("hidden", !keep);
      n += keep;
    });
    shown.textContent = n + " of " + runs.length + " runs shown";
    const params = new URLSearchParams();
    if (q.value) params.set("q", q.value);
    if (verdict.value) params.set("verdict", verdict.value);
    history.replaceState(null, "", params.toString() ? "?" + params : location.pathname);
  }
  const given = new URLSearchParams(location.search);
  q.value = given.get("q") || "";
  if (given.get("verdict")) verdict.value = given.get("verdict");
  q.addEventListener("input", apply);
  verdict.addEventListener("change", apply);
  apply();
  window.rqIndex = { ready: true };
})();
