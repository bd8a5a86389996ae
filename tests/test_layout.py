"""docs/architecture.md's Layout section is the map of eddi_rag/: it names every module and package there,
and everything it names exists; every store backend registered has its file in it. The import graph has
no circle and no import running back up a layer: the layout's order is the order the imports run (issue 67)."""

from __future__ import annotations

import re
from pathlib import Path

from eddi_rag.backends import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "eddi_rag"


def layout() -> str:
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index("## Layout\n"):]
    return section[section.index("```\n") + 4:section.index("\n```", section.index("```\n") + 4)]


def named() -> set[str]:
    return set(re.findall(r"[A-Za-z_][\w]*(?:\.py|/)", layout()))


def test_the_layout_names_every_module_and_package_of_the_top_level():
    top = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    top |= {p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert sorted(top - named()) == []


def test_the_layout_names_every_store_backend():
    files = {spec.split(":")[0].rsplit(".", 1)[1] + ".py" for spec in registry.BUILTIN[registry.STORES].values()}
    assert sorted(files - named()) == []


def rooms() -> dict[str, str]:
    """Each folder of eddi_rag/ the layout describes -> what it says of it (its lines)."""
    out: dict[str, str] = {}
    current = None
    for line in layout().splitlines()[1:]:
        found = re.match(r"^    ([A-Za-z_]\w*(?:/|\.py))\s", line + " ")
        current = found.group(1) if found else current if line.startswith(" " * 17) else None
        if current:
            out[current] = out.get(current, "") + " " + line
    return {room: text for room, text in out.items() if room.endswith("/")}


CONNECTORS = PACKAGE / "sources" / "connectors"  # their registry is their list: a new one is its file and its tests
NAMED_OTHERWISE = {  # a type's name as another word
    "verbs/eddi_export.py": {"'folder'"},  # a field name (a source's folder) among those an export keeps
    "testing/store_conformance.py": {"'s3'"},  # a chunk's id
}


def test_each_module_is_named_in_the_folder_it_lives_in():
    """A module the layout names lives in the folder it is named under (at any depth), and every module of a folder is
    named there, but connectors."""
    assert sorted(rooms()) == sorted(p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    misplaced, unnamed = [], []
    for room, text in rooms().items():
        folder = PACKAGE / room.rstrip("/")
        names = set(re.findall(r"[A-Za-z_]\w*(?:\.py|/)", text)) - {room}
        here = {p.name for p in folder.rglob("*.py")} | {p.name + "/" for p in folder.rglob("*") if p.is_dir()}
        misplaced += [f"{room}{n}" for n in sorted(names - here)]
        unnamed += [p.relative_to(PACKAGE).as_posix() for p in sorted(folder.rglob("*.py"))
                    if p.name not in names and p.name != "__init__.py" and CONNECTORS not in p.parents]
    assert (misplaced, unnamed) == ([], [])


def test_a_connector_is_its_file_alone():
    """Nothing outside a connector's module names its type or imports it: the schema, the docs and the Manager's card
    are made from the registry (a new connector adds its file and its tests, nothing else)."""
    from eddi_rag.sources.connectors import connectors

    modules = [p.stem for p in CONNECTORS.glob("*.py") if p.name != "__init__.py"]
    assert sorted(modules) == sorted(m.__module__.rsplit(".", 1)[1] for m in map(type, connectors().values()))
    theirs = [t for t in connectors() if t not in ("web", "upload")]  # (EDDI's two: its export and import name them)
    found = []
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.js"), *PACKAGE.rglob("*.html")]:
        if CONNECTORS in path.parents or "__pycache__" in path.parts:
            continue
        text = path.read_text()
        name = path.relative_to(PACKAGE).as_posix()
        found += [f"{name}: {t!r}" for t in theirs if re.search(rf"[\"']{t}[\"']", text) and repr(t) not in NAMED_OTHERWISE.get(name, ())]
        found += [f"{name} imports {m}" for m in re.findall(r"eddi_rag\.sources\.connectors\.(\w+)", text)]
    assert found == []


def test_everything_the_layout_names_exists():
    outside = {"schemas/", "examples/", "workflows/", "documents/", "tests/", "conformance/", "benchmarks/", "docs/",
               "templates/", "static/", "eddi_rag/"}
    existing = {p.name for p in PACKAGE.rglob("*.py")} | {p.name + "/" for p in PACKAGE.rglob("*") if p.is_dir()}
    assert sorted(named() - existing - outside) == []
    assert all((ROOT / d).is_dir() for d in ("schemas", "examples/workflows", "examples/documents", "docs", "tests/conformance", "benchmarks"))


FACES = ("eddi_rag.api", "eddi_rag.ui", "eddi_rag.cli", "eddi_rag.interop", "eddi_rag.tools", "eddi_rag.runtime")
BELOW_THE_FACES = ("verbs", "workflow", "retrieval", "ingest", "sources", "stores", "embeddings", "resources", "answers",
                   "config", "errors", "state", "backends", "records", "common", "auth")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p) for p in PACKAGE.rglob("*.py")}


def imports() -> dict[str, set[str]]:
    """module -> the eddi_rag modules it imports (anywhere in it, at any depth)."""
    import ast

    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eddi_rag"):
                modules = {f"{node.module}.{a.name}" for a in node.names} & MODULES
                found |= modules
                if len(modules) < len(node.names):  # (a name of the module itself: ``from eddi_rag import __version__``)
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("eddi_rag")}
        graph[module] = found
    return {m: {i for i in deps if i in graph and i != m} for m, deps in graph.items()}


def test_no_import_circle_between_files():
    graph = imports()
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}  # a package's own face
    state: dict[str, int] = {}
    circles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


def order() -> list[str]:
    """The top-level modules and packages as the layout lists them, from the faces down."""
    return [m.group(1) for line in layout().splitlines() if (m := re.match(r"^    ([A-Za-z_]\w*(?:/|\.py))\s", line + " "))]


def test_every_import_points_down_the_layout():
    """A module imports only what the layout lists at or below its own line; an import of the package's face (``eddi_rag``,
    which names the Runtime) counts as one of ``__init__.py``, so a leaf reading the version from it runs back up."""
    rank = {room: i for i, room in enumerate(order())}

    def room(module: str) -> str:
        parts = module.split(".")
        return "__init__.py" if len(parts) == 1 else parts[1] + ("/" if (PACKAGE / parts[1]).is_dir() else ".py")

    upward = sorted(f"{m} -> {d}" for m, deps in imports().items() for d in deps if rank[room(d)] < rank[room(m)])
    assert upward == []


def test_nothing_below_the_faces_imports_a_face():
    upward = sorted(f"{m} -> {d}" for m, deps in imports().items() for d in deps
                    if m.count(".") and m.split(".")[1] in BELOW_THE_FACES and d.startswith(FACES))
    assert upward == []


def test_no_two_folders_import_each_other():
    """Each package of eddi_rag/ is one layer: when a file of A imports one of B, nothing in B imports A."""
    def room(module: str) -> str:
        return module.split(".")[1] if module.count(".") else ""

    between: dict[tuple[str, str], str] = {}
    for m, deps in imports().items():
        for d in deps:
            if room(m) != room(d) and room(d):
                between.setdefault((room(m), room(d)), f"{m} -> {d}")
    assert sorted(f"{why}, and {between[(b, a)]}" for (a, b), why in between.items() if (b, a) in between and a < b) == []


# --- the faces call the verbs -------------------------------------------------------------------------
# A face (api/, ui/, interop/, tools/, cli.py) reaches the library through the runtime's verbs and its life
# cycle, and imports nothing of the layers below but their contracts (the store protocol, stores/base.py: what
# the LangChain adapter wraps and third parties implement). BY_DESIGN names what may do otherwise, and why.
VERBS = {"vault", "audit", "knowledge_bases", "catalog", "saving", "search", "ingesting", "documents", "health", "turns", "pipeline", "sources",
         "feedback", "questions", "keys", "groups", "grants", "variables", "collections",
         "close", "start_work", "stop_work", "readiness", "state_dialect", "processes_to_serve"}
BELOW = ("eddi_rag.ingest", "eddi_rag.resources", "eddi_rag.stores", "eddi_rag.state", "eddi_rag.retrieval", "eddi_rag.answers",
         "eddi_rag.embeddings", "eddi_rag.sources")
CONTRACTS = {"eddi_rag.stores.base", "eddi_rag.embeddings.model"}  # what third parties implement (and LangChain wraps)
BY_DESIGN = {
    # ``evaluate`` measures the bare components (cosine over the in-memory store, bm25s, the local model) as the
    # floor the product's own pipeline (``evaluate_pipeline``, through the verbs) is compared with
    "tools/eval.py": {"eddi_rag.state.sqlite", "eddi_rag.stores.embedded.bm25", "eddi_rag.stores.embedded.memory",
                      "eddi_rag.embeddings.cache", "eddi_rag.embeddings.local", "eddi_rag.retrieval.fusion"},
    # the offline demo shows the answering models themselves: which one answered, and beside the small local model
    # the context's own words (the extractive answer), so a first user sees what each gives
    "tools/demo.py": {"eddi_rag.answers", "eddi_rag.answers.choice", "eddi_rag.answers.extractive", "eddi_rag.answers.smollm2"},
    # ``serve --processes N`` makes the default model's session as it starts, for the processes it forks to share: a
    # matter of processes, not a rule a verb holds
    "cli.py": {"eddi_rag.embeddings"},
    # a serving process makes the default model's session once its routes are declared (issue 67, point 4)
    "api/served.py": {"eddi_rag.embeddings"},
}


def reached_past() -> dict[str, set[str]]:
    """Face file -> what it reaches past the verbs: ``runtime.<not a verb>`` and imports of the layers below."""
    import ast

    faces = [*(PACKAGE / "api").rglob("*.py"), *(PACKAGE / "ui").rglob("*.py"), *(PACKAGE / "interop").rglob("*.py"),
             *(PACKAGE / "tools").rglob("*.py"), PACKAGE / "cli.py"]
    found: dict[str, set[str]] = {}
    for path in faces:
        name = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            held = node.value if isinstance(node, ast.Attribute) else None  # runtime.X, rt.X, self.runtime.X
            if held is not None and (isinstance(held, ast.Name) and held.id in ("runtime", "rt") or
                                     isinstance(held, ast.Attribute) and held.attr == "runtime") and node.attr not in VERBS:
                found.setdefault(name, set()).add(f"runtime.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(BELOW) and node.module not in CONTRACTS:
                found.setdefault(name, set()).add(node.module)
    return found


def test_the_faces_reach_the_library_through_the_verbs():
    found = reached_past()
    past = {face: sorted(what - BY_DESIGN.get(face, set())) for face, what in found.items() if what - BY_DESIGN.get(face, set())}
    assert past == {}, "a face reaches past the verbs: add the rule to a verb and call it there"
    assert {face: sorted(what) for face, what in found.items()} == {face: sorted(what) for face, what in BY_DESIGN.items()}, \
        "BY_DESIGN names more than is reached: strike it off"
