"""Render a task page as a real, self-contained HTML5 document.

Every interactive element carries a stable ``bid`` attribute (the same ids the simulated world
prints), labels are bound to their inputs, fields are grouped in fieldsets, tables have header
cells, and nothing is loaded from outside the page. A small inline script reports every field
change and every button activation, in order, to the page server (``POST /api/events``) and
shows the activated control's message in the status region — the same behaviour the simulated
world reproduces.
"""

from __future__ import annotations

from html import escape

from forms_bench.schema import FormField, Task

_CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1b1b1b}
table{border-collapse:collapse;margin:.5rem 0 1rem}
th,td{border:1px solid #999;padding:.25rem .6rem;text-align:left}
caption{font-weight:600;text-align:left;padding:.25rem 0}
fieldset{margin:.75rem 0;padding:.5rem 1rem}
.row{margin:.4rem 0}
label{display:inline-block;min-width:12rem}
.opt label{min-width:0;margin-right:1rem}
button{margin-right:.5rem;padding:.35rem .9rem}
[role=status]{margin-top:1rem;font-weight:600}
"""

# Reports changes/activations to the page server; `seq` keeps the order even when requests
# overtake each other. `window.__advsimFlush()` resolves when every report has been answered.
_JS = r"""
(function () {
  var params = new URLSearchParams(location.search);
  var session = params.get("session") || "";
  var taskId = document.body.dataset.task;
  var seq = 0, pending = [], last = {};
  function send(ev) {
    ev.seq = seq++;
    if (!session) { return; }
    pending.push(fetch("/api/events?task=" + encodeURIComponent(taskId) + "&session=" +
      encodeURIComponent(session), {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(ev)}).catch(function () {}));
  }
  function valueOf(el) {
    var kind = el.dataset.kind;
    if (kind === "checkbox") { return el.checked; }
    if (kind === "select") { return el.options[el.selectedIndex] ? el.options[el.selectedIndex].text : ""; }
    if (kind === "radio") {
      var on = el.querySelector("input[type=radio]:checked");
      return on ? on.dataset.option : "";
    }
    return el.value;
  }
  function state() {
    var out = {};
    document.querySelectorAll("[data-key]").forEach(function (el) { out[el.dataset.key] = valueOf(el); });
    return out;
  }
  last = state();
  function onChange(e) {
    var el = e.target.closest("[data-key]");
    if (!el) { return; }
    var v = valueOf(el);
    if (last[el.dataset.key] === v) { return; }
    last[el.dataset.key] = v;
    send({kind: "change", key: el.dataset.key, value: v});
  }
  document.addEventListener("input", onChange, true);
  document.addEventListener("change", onChange, true);
  document.querySelectorAll("button[data-control]").forEach(function (b) {
    b.addEventListener("click", function () {
      document.getElementById("status").textContent = b.dataset.message;
      send({kind: "activate", key: b.dataset.control, values: state()});
    });
  });
  window.__advsimState = state;
  window.__advsimFlush = function () { return Promise.all(pending).then(function () { return seq; }); };
})();
"""


def _attr(s: str) -> str:
    return escape(s, quote=True)


def _field_html(f: FormField, value) -> str:
    dis = " disabled" if f.disabled else ""
    fid = f"f-{f.key}"
    common = f'data-key="{f.key}" data-kind="{f.kind}"'
    if f.kind == "text":
        return (f'<div class="row"><label for="{fid}">{escape(f.label)}</label>'
                f'<input type="text" id="{fid}" name="{f.key}" bid="{f.bid}" {common} '
                f'value="{_attr(value)}" autocomplete="off"{dis}></div>')
    if f.kind == "textarea":
        return (f'<div class="row"><label for="{fid}">{escape(f.label)}</label>'
                f'<textarea id="{fid}" name="{f.key}" bid="{f.bid}" {common} rows="2"{dis}>'
                f'{escape(value)}</textarea></div>')
    if f.kind == "checkbox":
        chk = " checked" if value else ""
        return (f'<div class="row"><input type="checkbox" id="{fid}" name="{f.key}" bid="{f.bid}" '
                f'{common}{chk}{dis}><label for="{fid}">{escape(f.label)}</label></div>')
    if f.kind == "select":
        opts = "".join(
            f'<option value="{_attr(o)}"{" selected" if o == value else ""}>{escape(o)}</option>'
            for o in f.options)
        return (f'<div class="row"><label for="{fid}">{escape(f.label)}</label>'
                f'<select id="{fid}" name="{f.key}" bid="{f.bid}" {common}{dis}>{opts}</select></div>')
    # radio group: a fieldset acting as a radiogroup, one labelled radio button per option
    radios = "".join(
        f'<span class="opt"><input type="radio" id="{fid}-{i}" name="{f.key}" bid="{b}" '
        f'data-option="{_attr(o)}" value="{_attr(o)}"{" checked" if o == value else ""}{dis}>'
        f'<label for="{fid}-{i}">{escape(o)}</label></span>'
        for i, (o, b) in enumerate(zip(f.options, f.option_bids)))
    return (f'<fieldset role="radiogroup" bid="{f.bid}" {common}><legend>{escape(f.label)}</legend>'
            f'{radios}</fieldset>')


def render_html(task: Task, values: dict | None = None) -> str:
    """The task's page as an HTML5 document.

    Args:
        task: a validated task.
        values: field key -> value to render instead of the initial values (optional; used to
            render a state other than o_0).

    Returns:
        The document text (UTF-8 safe). It references no external resource.
    """
    page = task.page
    vals = page.initial_values()
    if values:
        vals.update(values)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(page.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        f'<body data-task="{_attr(task.id)}">',
        "<main>",
        f"<h1>{escape(page.title)}</h1>",
        f"<p>{escape(page.intro)}</p>",
    ]
    if page.tables:
        out.append("<h2>Records</h2>")
    for t in page.tables:
        out.append(f"<table><caption>{escape(t.caption)}</caption><thead><tr>"
                   + "".join(f'<th scope="col">{escape(c)}</th>' for c in t.columns)
                   + "</tr></thead><tbody>")
        for row in t.rows:
            out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
    if page.rules:
        out.append("<h2>Rules</h2>")
    out.extend(f"<p>{escape(r)}</p>" for r in page.rules)
    out.append(f'<form aria-label="{_attr(page.form_name)}" onsubmit="return false">')
    for fs in page.fieldsets:
        out.append(f"<fieldset><legend>{escape(fs.legend)}</legend>")
        out.extend(_field_html(f, vals[f.key]) for f in fs.fields)
        out.append("</fieldset>")
    out.append('<div class="row">')
    for c in page.controls:
        out.append(f'<button type="button" bid="{c.bid}" data-control="{c.key}" '
                   f'data-message="{_attr(c.message)}">{escape(c.label)}</button>')
    out.append("</div></form>")
    out.append(f'<div role="status" id="status" bid="{page.status_bid}"></div>')
    out.append("</main>")
    out.append(f"<script>{_JS}</script>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"

