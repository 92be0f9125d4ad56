"""The CDP normalization of real-page idioms (issue 11, item 2): controls inside labels,
spin buttons, read-only inputs, frames.

The fast tests feed :func:`worlds.web.axtree.from_cdp` node lists shaped like Chromium's (the
shapes were read from Debian's Chromium 156 ``Accessibility.getFullAXTree``); the browser tests load
hand-made pages into Chromium and compare the whole observation. For each page the comment says
what BrowserGym's ``flatten_axtree_to_str`` shows for the same elements (read from its
source: it prints every named node with its CDP name, value and properties) and where our text
differs in bytes only.
"""

from __future__ import annotations

import itertools
import logging

import pytest

from tests.sample_task import task as SAMPLE
from worlds.web.axtree import dom_bids, frame_letters, from_cdp, serialize

_ids = itertools.count(1)


def n(role, name=None, *kids, value=None, be=None, ignored=False, **props):
    """A CDP AX node (nested: ``kids`` are nodes made by this helper)."""
    node = {"nodeId": str(next(_ids)), "role": {"type": "role", "value": role}, "kids": list(kids)}
    if name is not None:
        node["name"] = {"type": "computedString", "value": name}
    if value is not None:
        node["value"] = {"type": "number" if isinstance(value, (int, float)) else "string", "value": value}
    if be is not None:
        node["backendDOMNodeId"] = be
    if ignored:
        node["ignored"] = True
    plist = []
    for k, v in props.items():
        if k == "labelledby":
            plist.append({"name": k, "value": {"type": "nodeList",
                                               "relatedNodes": [{"backendDOMNodeId": b} for b in v]}})
        else:
            plist.append({"name": k, "value": {"type": "x", "value": v}})
    node["properties"] = plist
    return node


def flat(root):
    """The CDP ``nodes`` list of a nested tree."""
    out = []

    def rec(node, parent):
        kids = node.pop("kids")
        node["childIds"] = [k["nodeId"] for k in kids]
        if parent is not None:
            node["parentId"] = parent
        out.append(node)
        for k in kids:
            rec(k, node["nodeId"])

    rec(root, None)
    return out


def page(*kids):
    return n("RootWebArea", "T", n("none", None, n("main", "", *kids), ignored=True))


def test_controls_inside_a_naming_label_are_kept_and_its_text_dropped():
    # <label>Full name <input></label>, <label>Agree <span><input type=checkbox></span> terms</label>
    # <label>Orphan</label> (names nothing: printed as BrowserGym prints it)
    nodes = flat(page(
        n("LabelText", "", n("StaticText", "Full name "),
          n("textbox", "Full name", n("generic", "", n("StaticText", "Jo")), value="Jo", be=3,
            labelledby=[8], readonly=False, required=False), be=8),
        n("LabelText", "", n("StaticText", "Agree "),
          n("generic", "", n("checkbox", "Agree terms", be=5, checked="false", labelledby=[9])),
          n("StaticText", " terms"), be=9),
        n("StaticText", " "),
        n("LabelText", "", n("StaticText", "Orphan"), be=12),
        n("LabelText", "", be=13),
    ))
    tree = from_cdp(nodes, {3: "1", 5: "2"})
    assert serialize(tree) == (
        "RootWebArea 'T'\n"
        "\tmain ''\n"
        "\t\t[1] textbox 'Full name' value='Jo'\n"
        "\t\t[2] checkbox 'Agree terms'\n"
        "\t\tLabelText ''\n"
        "\t\t\tStaticText 'Orphan'")


def test_values_and_states():
    nodes = flat(page(
        n("spinbutton", "Hours", n("generic", "", n("StaticText", "7.50")), value=7.5, valuetext="7.50"),
        n("spinbutton", "Empty", valuetext=""),
        n("slider", "Level", value=4, valuetext=""),
        n("textbox", "Ticket", value="T-9", readonly=True, required=False),
        n("textbox", "Street", required=True, readonly=False),
        n("checkbox", "All", checked="mixed"),
        n("button", "Bold", n("StaticText", "Bold"), pressed="true"),
    ))
    assert serialize(from_cdp(nodes, {})).split("\n")[2:] == [
        "\t\tspinbutton 'Hours' value='7.50'",
        "\t\tspinbutton 'Empty' value=''",
        "\t\tslider 'Level' value='4'",
        "\t\ttextbox 'Ticket' value='T-9' readonly",
        "\t\ttextbox 'Street' value='' required",
        "\t\tcheckbox 'All' checked='mixed'",
        "\t\tbutton 'Bold' pressed",
    ]


def test_frames_are_traversed():
    inner = flat(n("RootWebArea", "Billing", n("button", "Pay", be=41)))
    nodes = flat(page(n("Iframe", "", be=20), n("Iframe", "", be=21)))
    tree = from_cdp(nodes, {20: "a", 41: "a2", 21: "b"}, frames={20: inner})
    assert serialize(tree) == ("RootWebArea 'T'\n\tmain ''\n\t\t[a] Iframe ''\n\t\t\tRootWebArea 'Billing'\n"
                               "\t\t\t\t[a2] button 'Pay'\n\t\t[b] Iframe ''")


def test_frame_letters_follow_browsergym():
    assert [frame_letters(i) for i in (0, 25, 26, 27, 51, 52, 701, 702)] == [
        "a", "z", "aA", "aB", "aZ", "bA", "zZ", "aAA"]


def test_dom_bids_prefix_frame_content():
    def el(name, be, *kids, bid=None, frame=None, doc=None):
        node = {"nodeName": name, "backendNodeId": be, "attributes": ["bid", bid] if bid else [],
                "children": list(kids)}
        if frame:
            node["frameId"] = frame
            node["contentDocument"] = doc
        return node

    root = el("#document", 1, el("HTML", 2,
              el("BUTTON", 3, bid="a"),  # a bid that looks like a frame id: frames skip it
              el("IFRAME", 4, frame="F1", doc=el("#document", 10, el("INPUT", 11, bid="1"),
                                                 el("IFRAME", 12, frame="F3", doc=el("#document", 20,
                                                    el("BUTTON", 21, bid="7"))))),
              el("IFRAME", 5, bid="pay", frame="F2", doc=el("#document", 30, el("BUTTON", 31, bid="1")))))
    d = dom_bids(root)
    assert d.bids == {3: "a", 4: "b", 11: "b1", 12: "ba", 21: "ba7", 5: "pay", 31: "pay1"}
    assert d.frames == {4: "F1", 12: "F3", 5: "F2"}
    assert d.nodes == {1, 2, 3, 4, 10, 11, 12, 20, 21, 5, 30, 31}


# --------------------------------------------------------------------------------------------
# Hand-made pages in Chromium.
# --------------------------------------------------------------------------------------------

browser = pytest.mark.browser

# BrowserGym shows, for the same elements: textbox 'Full name' value='Ann Lee'; combobox
# 'Technician' value='Bob' (plus hasPopup='menu', expanded=False) with options 'Ann', 'Bob'
# selected=True; radiogroup 'Shift' with radio 'Day' checked='true' and radio 'Night'
# checked='false'; checkbox 'I accept the terms' checked='false'; spinbutton 'Hours' value=7.5
# (plus valuemin/valuemax/valuetext='7.50'); textbox 'Ticket' value='T-9' (no readonly: BrowserGym
# drops that property); LabelText '' / StaticText 'Orphan text'; each Iframe with its document's
# RootWebArea and controls; button 'Save'. Ours differs in bytes only: no LabelText/StaticText
# lines for the labels that name a control, our bids (BrowserGym numbers every element), frame
# content prefixed with the frame's bid as BrowserGym prefixes it.
IDIOMS = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Idioms</title></head>
<body><main><form aria-label="Work order">
<label>Full name <input type="text" bid="1" value="Ann Lee"></label>
<label>Technician <select bid="2"><option>Ann</option><option selected>Bob</option></select></label>
<div role="radiogroup" aria-label="Shift" bid="3"><label>Day <span><input type="radio" name="s" bid="4"
 checked></span></label><label>Night <span><input type="radio" name="s" bid="5"></span></label></div>
<label>I accept <span><input type="checkbox" bid="6"></span> the terms</label>
<label>Hours <input type="number" bid="7" value="7.50"></label>
<label>Ticket <input type="text" bid="8" value="T-9" readonly></label>
<label>Orphan text</label>
<iframe bid="f" srcdoc="<title>Billing</title><form aria-label='Billing'><label>Amount <input bid='1'
 value='12'></label><button bid='2'>Pay</button></form>"></iframe>
<iframe srcdoc="<button bid='1'>Inner</button>"></iframe>
<button bid="9">Save</button>
</form></main></body></html>"""

IDIOMS_OBS = """RootWebArea 'Idioms'
\tmain ''
\t\tform 'Work order'
\t\t\t[1] textbox 'Full name' value='Ann Lee'
\t\t\t[2] combobox 'Technician' value='Bob'
\t\t\t\toption 'Ann'
\t\t\t\toption 'Bob' selected
\t\t\t[3] radiogroup 'Shift'
\t\t\t\t[4] radio 'Day' checked
\t\t\t\t[5] radio 'Night'
\t\t\t[6] checkbox 'I accept the terms'
\t\t\t[7] spinbutton 'Hours' value='7.50'
\t\t\t[8] textbox 'Ticket' value='T-9' readonly
\t\t\tLabelText ''
\t\t\t\tStaticText 'Orphan text'
\t\t\t[f] Iframe ''
\t\t\t\tRootWebArea 'Billing'
\t\t\t\t\tform 'Billing'
\t\t\t\t\t\t[f1] textbox 'Amount' value='12'
\t\t\t\t\t\t[f2] button 'Pay'
\t\t\t[a] Iframe ''
\t\t\t\tRootWebArea ''
\t\t\t\t\t[a1] button 'Inner'
\t\t\t[9] button 'Save'"""

# BrowserGym: the checkbox inside the legend, textbox 'Street' required, the button inside the
# caption, StaticText 'Priority code' and textbox 'Priority code' (aria-labelledby), textbox
# 'Email address', checkbox 'All' checked='mixed', button 'Bold' pressed='true', textbox 'Code'
# disabled=True, searchbox 'Search' value='bolts', slider 'Level' value=4; the empty number
# input has no value in BrowserGym (Chromium reports none); we print value='' as for empty boxes.
IDIOMS_2 = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>More</title></head>
<body><main>
<fieldset><legend><label><input type="checkbox" bid="1" checked> Ship to another address</label></legend>
<label>Street <input bid="2" required></label></fieldset>
<table><caption>Lines <button bid="3">Add line</button></caption><tr><th>Item</th></tr><tr><td>Bolt</td></tr></table>
<span id="lbl">Priority code</span><input bid="4" aria-labelledby="lbl" value="P1">
<label for="x"><b>Email</b> address</label><input id="x" bid="5" type="email" value="a@b.c">
<input type="checkbox" bid="6" aria-label="All" id="m">
<script>document.getElementById('m').indeterminate = true</script>
<button bid="7" aria-pressed="true">Bold</button>
<fieldset disabled><legend>Locked</legend><label>Code <input bid="8" value="z"></label></fieldset>
<label>Search <input type="search" bid="9" value="bolts"></label>
<label>Level <input type="range" bid="10" min="0" max="10" value="4"></label>
<label>Empty number <input type="number" bid="11"></label>
</main></body></html>"""

IDIOMS_2_OBS = """RootWebArea 'More'
\tmain ''
\t\tgroup ' Ship to another address'
\t\t\t[1] checkbox 'Ship to another address' checked
\t\t\t[2] textbox 'Street' value='' required
\t\ttable 'Lines Add line'
\t\t\t[3] button 'Add line'
\t\t\trow ''
\t\t\t\tcolumnheader 'Item'
\t\t\trow ''
\t\t\t\tcell 'Bolt'
\t\tStaticText 'Priority code'
\t\t[4] textbox 'Priority code' value='P1'
\t\t[5] textbox 'Email address' value='a@b.c'
\t\t[6] checkbox 'All' checked='mixed'
\t\t[7] button 'Bold' pressed
\t\tgroup 'Locked'
\t\t\t[8] textbox 'Code' value='z' disabled
\t\t[9] searchbox 'Search' value='bolts'
\t\t[10] slider 'Level' value='4'
\t\t[11] spinbutton 'Empty number' value=''"""


@pytest.fixture(scope="module")
def world():
    from worlds.web.browser import BrowserWorld

    w = BrowserWorld()
    w.reset(SAMPLE)
    yield w
    w.close()


@browser
@pytest.mark.parametrize("html,want", [(IDIOMS, IDIOMS_OBS), (IDIOMS_2, IDIOMS_2_OBS)], ids=["idioms", "idioms-2"])
def test_hand_made_page_idioms(world, html, want):
    world.page.set_content(html)
    assert world.observe() == want


@browser
def test_thirty_frames_are_all_observed(world):
    frames = "".join(f"<iframe srcdoc=\"<button bid='1'>Frame {i}</button>\"></iframe>" for i in range(30))
    world.page.set_content(f"<title>Frames</title><main>{frames}</main>")
    obs = world.observe().split("\n")
    ids = [frame_letters(i) for i in range(30)]
    assert ids[-4:] == ["aA", "aB", "aC", "aD"]
    assert obs[:2] == ["RootWebArea 'Frames'", "\tmain ''"]
    assert obs[2:] == [ln for i, f in enumerate(ids) for ln in (
        f"\t\t[{f}] Iframe ''", "\t\t\tRootWebArea ''", f"\t\t\t\t[{f}1] button 'Frame {i}'")]


@browser
def test_content_added_after_the_first_observation_gets_its_bids(world):
    world.page.set_content("<title>Late</title><main><p>Loading</p></main>")
    assert world.observe() == "RootWebArea 'Late'\n\tmain ''\n\t\tparagraph ''\n\t\t\tStaticText 'Loading'"
    world.page.evaluate("""() => { document.querySelector('main').innerHTML =
        '<label>Name <input bid="5" value="x"></label><iframe srcdoc="<button bid=1>B</button>"></iframe>'; }""")
    world.page.wait_for_function("() => document.querySelector('iframe').contentDocument.querySelector('button')")
    assert world.observe() == ("RootWebArea 'Late'\n\tmain ''\n\t\t[5] textbox 'Name' value='x'\n"
                               "\t\t[a] Iframe ''\n\t\t\tRootWebArea ''\n\t\t\t\t[a1] button 'B'")


@browser
def test_unreadable_frame_is_logged(world, caplog):
    caplog.set_level(logging.WARNING, logger="worlds.web.browser")
    world.page.set_content("<title>X</title><main><iframe bid='q' srcdoc='<p>hi</p>'></iframe></main>")
    world.observe()
    world._dom.frames.clear()  # as for a frame whose document the DOM does not show
    orig = world._dom_index

    def stale_index():
        d = orig()
        d.frames.clear()
        return d

    world._dom_index = stale_index
    try:
        assert world.observe() == "RootWebArea 'X'\n\tmain ''\n\t\t[q] Iframe ''"
        world.observe()  # logged once per page
    finally:
        del world._dom_index
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["BrowserWorld: task demo-1: the accessibility tree of frame [q] cannot be read "
                        "(it has no document in the DOM); its content is not observed"]


@browser
def test_cross_site_frame_is_read_through_its_own_session(world, tmp_path):
    # 127.0.0.1 (the page) and localhost (the frame) are different sites: under site isolation
    # the frame runs in its own process, which the page's CDP session cannot read
    import functools
    import http.server
    import threading

    (tmp_path / "pay.html").write_text("<!DOCTYPE html><title>Pay</title><form aria-label='Card'><label>Card "
                                       "number <input bid='1' value='4111'></label><button bid='2'>Pay</button>"
                                       "<iframe srcdoc=\"<button bid='3'>Help</button>\"></iframe></form>")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://localhost:{srv.server_address[1]}/pay.html"
        world.page.set_content(f"<title>Shop</title><main><iframe bid='p' src='{url}'></iframe>"
                               "<button bid='9'>Back</button></main>")
        assert [f.url for f in world.page.frames][1] == url
        assert world.observe() == (
            "RootWebArea 'Shop'\n\tmain ''\n\t\t[p] Iframe ''\n\t\t\tRootWebArea 'Pay'\n\t\t\t\tform 'Card'\n"
            "\t\t\t\t\t[p1] textbox 'Card number' value='4111'\n\t\t\t\t\t[p2] button 'Pay'\n"
            "\t\t\t\t\t[pa] Iframe ''\n\t\t\t\t\t\tRootWebArea ''\n\t\t\t\t\t\t\t[pa3] button 'Help'\n"
            "\t\t[9] button 'Back'")
    finally:
        srv.shutdown()
