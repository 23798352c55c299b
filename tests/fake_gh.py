#!/usr/bin/env python3
"""A stand-in for GitHub's ``gh`` CLI for the ci/ job scripts' tests.

It records every call (one JSON line of argv in ``$FAKE_GH_LOG``), keeps the repository's pull
requests, issues and labels in ``$FAKE_GH_STATE`` (JSON), and refuses, as the real ``gh`` would,
any subcommand or flag that ``gh``'s own usage text does not list: the usage is read from
``tests/data/gh-usage/<cmd>-<sub>.txt`` (``gh 2.23.0 <cmd> <sub> --help``, see the README there),
so a script calling ``gh pr create --labels`` or ``gh issue reopen`` fails here as it would on a
runner. Only the behaviour the scripts rely on is emulated; ``--jq``/``--template`` are refused
(the scripts filter JSON themselves, which keeps them testable).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

USAGE = Path(__file__).resolve().parent / "data" / "gh-usage"
FLAG = re.compile(r"^\s+(?:-(\w), )?--([\w-]+)(?: (\S+))?")


def die(message: str, code: int = 1) -> None:
    sys.stderr.write(message + "\n")
    raise SystemExit(code)


def flags_of(command: str) -> dict[str, tuple[str, bool]]:
    """long and short names -> (long name, takes a value), from the usage's FLAGS sections."""
    page = USAGE / f"{command.replace(' ', '-')}.txt"
    if not page.is_file():
        die(f"unknown command \"{command}\" for \"gh\" (not in the recorded usage)")
    table: dict[str, tuple[str, bool]] = {}
    section = ""
    for line in page.read_text().splitlines():
        if line and not line.startswith(" "):
            section = line.strip()
            continue
        m = FLAG.match(line)
        if m and section.endswith("FLAGS"):
            short, long, value = m.groups()
            takes = value is not None and not value.startswith("Show")
            table["--" + long] = (long, takes)
            if short:
                table["-" + short] = (long, takes)
    return table


def parse(command: str, args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    table = flags_of(command)
    opts: dict[str, list[str]] = {}
    positional: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        if arg.startswith("-") and arg != "-":
            name, eq, inline = arg.partition("=")
            if name not in table:
                die(f"unknown flag: {name}\n\nUsage:  gh {command} [flags]")
            long, takes = table[name]
            if takes and not eq:
                k += 1
                if k >= len(args):
                    die(f"flag needs an argument: {name}")
                inline = args[k]
            opts.setdefault(long, []).append(inline if takes else "true")
        else:
            positional.append(arg)
        k += 1
    for refused in ("jq", "template", "web"):
        if refused in opts:
            die(f"fake gh: --{refused} is not emulated")
    return opts, positional


def one(opts: dict[str, list[str]], name: str, default: str = "") -> str:
    return opts.get(name, [default])[-1]


def body(opts: dict[str, list[str]]) -> str | None:
    if "body-file" in opts:
        return Path(one(opts, "body-file")).read_text()
    return one(opts, "body") if "body" in opts else None


def fields(command: str, wanted: str) -> list[str]:
    known = (USAGE / f"{command.replace(' ', '-')}.fields.txt").read_text().split()
    names = wanted.split(",")
    for name in names:
        if name not in known:
            die(f"Unknown JSON field: \"{name}\"")
    return names


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        for key in ("prs", "issues", "labels", "runs", "branches_deleted"):
            self.data.setdefault(key, [])
        self.data.setdefault("next", 1)

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1))

    def number(self) -> int:
        n: int = self.data["next"]
        self.data["next"] = n + 1
        return n

    def find(self, kind: str, ref: str) -> dict[str, Any]:
        for item in self.data[kind]:
            if str(item["number"]) == ref.lstrip("#") or item.get("headRefName") == ref:
                return item
        die(f"no {'pull request' if kind == 'prs' else 'issue'} found for {ref}")
        raise AssertionError


def listing(store: Store, kind: str, command: str, opts: dict[str, list[str]]) -> None:
    state = one(opts, "state", "open")
    items = [i for i in store.data[kind] if state == "all" or i["state"] == state]
    if "head" in opts:
        items = [i for i in items if i["headRefName"] == one(opts, "head")]
    for label in opts.get("label", []):
        items = [i for i in items if label in i["labels"]]
    items = items[: int(one(opts, "limit", "30"))]
    if "json" in opts:
        names = fields(command, one(opts, "json"))
        shaped = [{n: ([{"name": x} for x in i[n]] if n == "labels" else i.get(n))
                   for n in names} for i in items]
        print(json.dumps(shaped))
    else:
        for i in items:
            print(f"{i['number']}\t{i['title']}\t{i.get('headRefName', '')}\t{i['state'].upper()}")


def create(store: Store, kind: str, opts: dict[str, list[str]]) -> None:
    text = body(opts)
    if "title" not in opts or text is None:
        die("must provide `--title` and `--body` (or `--fill`) when not running interactively")
    for label in opts.get("label", []):
        if label not in store.data["labels"]:
            die(f"could not add label: '{label}' not found")
    n = store.number()
    item: dict[str, Any] = {"number": n, "title": one(opts, "title"), "body": text,
                            "state": "open", "labels": list(opts.get("label", [])),
                            "comments": [], "url": f"https://github.com/o/r/{kind}/{n}"}
    if kind == "pull":
        head = one(opts, "head")
        if not head:
            die("fake gh: pr create without --head would prompt")
        if any(p["headRefName"] == head and p["state"] == "open" for p in store.data["prs"]):
            die(f"a pull request for branch \"{head}\" into branch \"{one(opts, 'base')}\" "
                "already exists")
        item.update(headRefName=head, baseRefName=one(opts, "base", "main"),
                    isDraft="draft" in opts)
        store.data["prs"].append(item)
    else:
        store.data["issues"].append(item)
    print(item["url"])


def main(argv: list[str]) -> None:
    log = os.environ.get("FAKE_GH_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(argv) + "\n")
    if len(argv) < 2:
        die("fake gh: give a command and a subcommand")
    command = f"{argv[0]} {argv[1]}"
    opts, pos = parse(command, argv[2:])
    store = Store(Path(os.environ["FAKE_GH_STATE"]))
    kind = "prs" if argv[0] == "pr" else "issues"
    if argv[1] == "list":
        listing(store, kind, command, opts)
    elif argv[1] == "create" and argv[0] in ("pr", "issue"):
        create(store, "pull" if argv[0] == "pr" else "issues", opts)
    elif argv[1] == "edit":
        item = store.find(kind, pos[0])
        item["title"] = one(opts, "title", item["title"])
        text = body(opts)
        item["body"] = item["body"] if text is None else text
        item["labels"] += opts.get("add-label", [])
    elif argv[1] == "close":
        item = store.find(kind, pos[0])
        if item["state"] != "open":
            die(f"{kind[:-1]} #{item['number']} is already closed")
        item["state"] = "closed"
        if "comment" in opts:
            item["comments"].append(one(opts, "comment"))
        if "delete-branch" in opts:
            store.data["branches_deleted"].append(item["headRefName"])
    elif argv[1] == "comment":
        store.find(kind, pos[0])["comments"].append(body(opts) or "")
    elif command == "label create":
        if pos[0] in store.data["labels"] and "force" not in opts:
            die(f"label with name \"{pos[0]}\" already exists; use `--force` to update")
        if pos[0] not in store.data["labels"]:
            store.data["labels"].append(pos[0])
    elif command == "workflow run":
        store.data["runs"].append({"workflow": pos[0], "ref": one(opts, "ref")})
    else:
        die(f"fake gh: {command} is in gh's usage but not emulated")
    store.save()


if __name__ == "__main__":
    main(sys.argv[1:])
