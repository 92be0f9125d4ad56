"""``advsim page``: a user's own web page in the browser world (see docs/own-pages.md).

``advsim page show --html page.html [--spec spec.json]``
    Print the page's observation as an agent sees it (bids assigned to elements that have none)
    and the fields and controls a spec can name; with ``--spec``, check that the spec fits.
``advsim page check --html page.html --spec spec.json --actions actions.txt [--json FILE]``
    Replay a trajectory (one action per line) and print the strict verdict with its reasons.
    Exit status: 0 success, 1 failure, 2 a spec, page or actions file that cannot be used.

``--url URL`` instead of ``--html`` opens a page served on 127.0.0.1 / localhost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from advsim.cli_output import json_option, write_json

page_app = typer.Typer(no_args_is_help=True,
                       help="A user's own web page: show it as an agent sees it, check a trajectory strictly.")


def _page_arg(html: Optional[Path], url: Optional[str]) -> str:
    if (html is None) == (url is None):
        typer.echo("error: give exactly one of --html FILE or --url URL", err=True)
        raise typer.Exit(2)
    return str(html) if html is not None else str(url)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _value(v) -> str:
    return "(none)" if v is None else repr(v)


@page_app.command("show")
def page_show(
    html: Optional[Path] = typer.Option(None, "--html", help="the page: an HTML file"),
    url: Optional[str] = typer.Option(None, "--url", help="the page: a URL on 127.0.0.1 or localhost"),
    spec: Optional[Path] = typer.Option(None, "--spec", help="a spec (JSON/YAML) to check against the page"),
) -> None:
    """Print the observation (with bids), the fields and controls, and whether a spec fits."""
    import logging

    from advsim.own_page import show_page
    from forms_bench.page_spec import PageSpecError
    from worlds.web.browser import BrowserWorldError
    from worlds.web.own_page import PageError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    page = _page_arg(html, url)
    try:
        view = show_page(page, spec)
    except (PageSpecError, PageError, BrowserWorldError) as e:
        _fail(e)
    typer.echo(view.observation)
    typer.echo("")
    typer.echo("fields:")
    for f in view.inventory.fields:
        extra = f"; options {', '.join(repr(o) for o in f.options)}" if f.options else ""
        typer.echo(f"  {f.describe()}  {f.kind}, initial {_value(f.initial)}{extra}")
    typer.echo("controls:")
    for c in view.inventory.controls:
        typer.echo(f"  {c.describe()}")
    if view.bound is not None:
        b = view.bound
        final = "none" if b.final_control is None else f"{b.label(b.final_control)!r} [{b.final_control}]"
        typer.echo(f"spec {spec}: fits the page ({len(b.targets)} targets, final control {final}, "
                   f"{len(b.protected)} protected fields, {len(b.forbidden)} forbidden controls)")


@page_app.command("check")
def page_check(
    html: Optional[Path] = typer.Option(None, "--html", help="the page: an HTML file"),
    url: Optional[str] = typer.Option(None, "--url", help="the page: a URL on 127.0.0.1 or localhost"),
    spec: Path = typer.Option(..., "--spec", help="the spec: JSON or YAML (docs/own-pages.md)"),
    actions: Path = typer.Option(..., "--actions", help="the trajectory: one BrowserGym action per line"),
    max_steps: int = typer.Option(12, "--max-steps", min=1, help="actions per episode (as WebForms-v0)"),
    json_out: Optional[Path] = json_option("also write the result as JSON"),
) -> None:
    """Replay a trajectory on the page in Chromium and print the strict verdict with its reasons."""
    import logging

    from advsim.own_page import ActionsFileError, check_trajectory, read_actions
    from forms_bench.page_spec import PageSpecError, load_spec
    from worlds.web.browser import BrowserWorldError
    from worlds.web.own_page import PageError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    page = _page_arg(html, url)
    try:
        parsed = load_spec(spec)
        lines = read_actions(actions)
        result = check_trajectory(page, parsed, lines, max_steps=max_steps)
    except (PageSpecError, PageError, ActionsFileError, BrowserWorldError) as e:
        _fail(e)
    typer.echo(f"page: {page}")
    typer.echo(f"goal: {result.goal}")
    typer.echo("steps:")
    for i, s in enumerate(result.steps, 1):
        typer.echo(f"  {i:>2}  {s.action}" + (f"\n      error: {s.error}" if s.error else ""))
    ended = {"send_msg_to_user": "send_msg_to_user", "max_steps": f"truncated after {max_steps} actions",
             "actions": "end of the actions file"}[result.ended]
    typer.echo(f"ended: {ended}" + (f" ({result.ignored} later actions not replayed)" if result.ignored else ""))
    if result.verdict.success:
        typer.echo("verdict: success")
    else:
        typer.echo("verdict: failure")
        for r in result.verdict.reasons:
            typer.echo(f"  - {r}")
    write_json(json_out, result.to_dict(), ensure_ascii=False)
    raise typer.Exit(0 if result.verdict.success else 1)
