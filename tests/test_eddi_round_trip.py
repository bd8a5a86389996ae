"""The EDDI round trip is the identity (issue 30, point 4): an export written the way EDDI writes one (Jackson's
pretty print, descriptors beside every file, parts we do not model) is imported and exported back; what we do not
model comes back byte for byte, what we model comes back as the same JSON, descriptors keep their names, a leftover
embedding parameter is a warning, and our own source types travel in a note EDDI ignores and our import reads."""

import io
import json
import zipfile

from eddi_rag.runtime import Runtime
from eddi_rag.verbs.eddi_export import EDDI_FIELDS, NOTES, export_agent
from eddi_rag.verbs.eddi_import import import_agent_export

AGENT, WF = "6750a1b2c3d4e5f6a7b8c9d0", "6750a1b2c3d4e5f6a7b8c9d1"
IDS = {kind: f"{kind[:3]}{n:021d}" for n, kind in enumerate(
    ("rag", "langchain", "httpcalls", "behavior", "regulardictionary", "output", "property", "mcpcalls"), 1)}
URIS = {
    "rag": "eddi://ai.labs.rag/ragstore/rags/{}?version=2",
    "langchain": "eddi://ai.labs.llm/llmstore/llms/{}?version=1",
    "httpcalls": "eddi://ai.labs.apicalls/apicallstore/apicalls/{}?version=1",
    "behavior": "eddi://ai.labs.rules/rulestore/rulesets/{}?version=3",
    "regulardictionary": "eddi://ai.labs.dictionary/dictionarystore/dictionaries/{}?version=1",
    "output": "eddi://ai.labs.output/outputstore/outputsets/{}?version=1",
    "property": "eddi://ai.labs.property/propertysetterstore/propertysetters/{}?version=1",
    "mcpcalls": "eddi://ai.labs.mcpcalls/mcpcallsstore/mcpcalls/{}?version=1",
}

# A knowledge base using every field of a RagConfiguration (EDDI's and ours), with a leftover embedding parameter.
EVERY_FIELD = {
    "name": "handbook", "embeddingProvider": "openai",
    "embeddingParameters": {"model": "text-embedding-3-large", "apiKey": "${vault:openaiKey}", "dimensions": 1024,
                            "timeout": 20000, "logRequests": True},
    "storeType": "pgvector",
    "storeParameters": {"host": "db.internal", "port": 5432, "database": "eddi", "user": "eddi",
                        "password": "${vault:pgPassword}", "dimension": 1024},
    "storeNamespace": "id", "chunkStrategy": "recursive", "chunkSize": 800, "chunkOverlap": 80, "maxResults": 6,
    "minScore": 0.55, "searchMode": "hybrid", "fusion": "rrf", "vectorWeight": 0.6, "maxDistance": 0.9,
    "recencyWindow": 0.02, "ttlSeconds": 2592000, "requiredMetadata": ["author"], "contextExpansion": "section",
    "expansionNeighbors": 2, "maxPassageChars": 3000, "reranker": "cohere",
    "rerankerParameters": {"apiKey": "${vault:cohereKey}", "model": "rerank-v3.5"}, "rerankCandidates": 30,
    "sources": [
        {"id": "docs", "name": "Docs site", "type": "web", "enabled": True, "cron": "0 3 * * *",
         "web": {"startUrl": "https://docs.example.com/", "sameSiteOnly": True, "pathPrefix": "/guide",
                 "maxDepth": 2, "maxPages": 300, "excludePatterns": ["/blog/"], "respectRobots": True},
         "settings": {"tombstoneAfterMissedRuns": 3}},
        {"id": "files", "name": "Contracts", "type": "upload", "upload": {"maxFiles": 50}},
    ],
}


def jackson(value) -> bytes:
    """JSON as EDDI's Jackson pretty printer writes it ("key" : value, two-space indent)."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace('": ', '" : ').encode()


def descriptor(uri: str, name: str, description: str = "") -> bytes:
    return jackson({"resource": uri, "createdBy": None, "createdOn": 1526046326255, "lastModifiedBy": None,
                    "lastModifiedOn": 1526046326255, "deleted": False, "name": name, "description": description})


def eddi_export(rag: dict) -> dict[str, bytes]:
    """The files of an export as EDDI's RestExportService writes them (layout: labsai/EDDI's weather agent)."""
    uri = {kind: URIS[kind].format(IDS[kind]) for kind in IDS}
    steps = [
        {"type": "eddi://ai.labs.parser", "extensions": {"dictionaries": [
            {"type": "eddi://ai.labs.parser.dictionaries.regular", "config": {"uri": uri["regulardictionary"]}}]},
         "config": {}},
        {"type": "eddi://ai.labs.behavior", "extensions": {}, "config": {"uri": uri["behavior"]}},
        {"type": "eddi://ai.labs.property", "config": {"uri": uri["property"]}},
        {"type": "eddi://ai.labs.rag", "config": {"uri": uri["rag"]}},
        {"type": "eddi://ai.labs.httpcalls", "config": {"uri": uri["httpcalls"]}},
        {"type": "eddi://ai.labs.mcpcalls", "config": {"uri": uri["mcpcalls"]}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": uri["langchain"]}},
        {"type": "eddi://ai.labs.output", "config": {"uri": uri["output"]}},
    ]
    bodies = {
        "rag": rag,
        "langchain": {"tasks": [{"id": "answer", "type": "openai", "actions": ["*"],
                                 "knowledgeBases": [{"name": rag["name"], "maxResults": 4}],
                                 "parameters": {"systemMessage": "Answer from {{snippets.tone}} the handbook.",
                                                "apiKey": "${vault:openaiKey}", "modelName": "gpt-4o-mini"}}]},
        "httpcalls": {"targetServerUrl": "https://api.example.com", "httpCalls": [
            {"name": "search", "actions": ["search"], "request": {"method": "get", "path": "/search",
                                                                  "queryParams": {"q": "[[${memory.current.input}]]"}}}]},
        "behavior": {"behaviorGroups": [{"name": "", "behaviorRules": [
            {"name": "Greet", "actions": ["greet"], "conditions": [
                {"type": "inputmatcher", "configs": {"expressions": "greeting(*)", "occurrence": "currentStep"}}]}]}]},
        "regulardictionary": {"words": [{"word": "hello", "expressions": "greeting(hello)", "frequency": 0}],
                              "phrases": [{"phrase": "good morning", "expressions": "greeting(good_morning)"}]},
        "output": {"outputSet": [{"action": "greet", "timesOccurred": 0, "outputs": [
            {"valueAlternatives": [{"type": "text", "text": "Hello! Ask me about the handbook."}]}]}]},
        "property": {"setOnActions": [{"actions": ["*"], "setProperties": [
            {"name": "count", "fromObjectPath": "properties.count+1", "scope": "longTerm"}]}]},
        "mcpcalls": {"mcpServerUrl": "https://mcp.example.com/sse", "toolsWhitelist": ["lookup"]},
    }
    folder = f"{WF}/1/"
    files = {f"{AGENT}.agent.json": jackson({"workflows": [f"eddi://ai.labs.workflow/workflowstore/workflows/{WF}?version=1"],
                                             "channels": []}),
             f"{AGENT}.descriptor.json": descriptor(f"eddi://ai.labs.agent/agentstore/agents/{AGENT}?version=1",
                                                    "Handbook agent", "answers from the staff handbook"),
             f"{folder}{WF}.workflow.json": jackson({"workflowSteps": steps}),
             f"{folder}{WF}.descriptor.json": descriptor(f"eddi://ai.labs.workflow/workflowstore/workflows/{WF}?version=1", "main"),
             "snippets/tone.snippet.json": jackson({"name": "tone", "category": "style", "content": "politely, in short sentences,"}),
             "schedules/sch000000000000000000001.schedule.json": jackson(
                 {"id": "sch000000000000000000001", "agentId": AGENT, "cronExpression": "0 8 * * 1", "message": "weekly digest"})}
    for kind, body in bodies.items():
        files[f"{folder}{IDS[kind]}.{kind}.json"] = jackson(body)
        files[f"{folder}{IDS[kind]}.descriptor.json"] = descriptor(uri[kind], f"the {kind}")
    return files


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for path, body in files.items():
            z.writestr(path, body)
    return buffer.getvalue()


def unzipped(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def round_trip(runtime: Runtime, files: dict[str, bytes]):
    report = import_agent_export(runtime.resources, zipped(files), checked=runtime.knowledge_bases.checked)
    return report, unzipped(export_agent(runtime.resources, report.agents[0].id))


def test_an_eddi_export_comes_back_the_same(tmp_path):
    before = eddi_export(EVERY_FIELD)
    with Runtime(tmp_path) as runtime:
        report, after = round_trip(runtime, before)
        assert sorted(after) == sorted([*before, NOTES])  # every file, at its place; our fields in the notes
        rag = f"{WF}/1/{IDS['rag']}.rag.json"
        ours = {k: v for k, v in EVERY_FIELD.items() if k not in EDDI_FIELDS}  # EDDI's import would drop them
        assert json.loads(after[rag]) == {k: v for k, v in EVERY_FIELD.items() if k in EDDI_FIELDS}
        assert json.loads(after[NOTES])["leftOut"] == [{"file": rag, "replaced": ours}]
        modelled = {f"{WF}/1/{WF}.workflow.json", f"{AGENT}.agent.json",
                    *(f"{WF}/1/{IDS[k]}.{k}.json" for k in ("langchain", "httpcalls"))}
        for path in (p for p in before if p != rag):
            if path.endswith(".descriptor.json"):  # names and descriptions kept; dates are the import's
                got, want = json.loads(after[path]), json.loads(before[path].replace(b"?version=2", b"?version=1"))
                assert (got["name"], got["description"], got["resource"]) == (want["name"], want["description"], want["resource"]), path
            elif path in modelled:  # a resource imported is version 1 here, as EDDI's import makes it
                assert json.loads(after[path]) == json.loads(before[path].replace(b"?version=2", b"?version=1")), path
            else:
                assert after[path] == before[path], path  # not modelled here: byte for byte
        assert [d.name for d in runtime.resources.descriptors("agents")] == ["Handbook agent"]
        assert runtime.resources.descriptor("workflows", WF).name == "main"
        assert [w for w in report.warnings if "logRequests" in w] and len(report.warnings) == 1
        assert len(report.kept) == 7 and not report.skipped  # 5 parts of the workflow, the snippet and the schedule
        again = import_agent_export(runtime.resources, zipped(after), checked=runtime.knowledge_bases.checked)
        assert runtime.resources.read("rags", next(r.id for r in again.created if r.kind == "rags")) == EVERY_FIELD


def test_a_leftover_embedding_parameter_is_a_warning_the_model_never_sees(client):
    config = {"name": "leftover", "embeddingProvider": "local", "embeddingParameters": {"logRequests": True, "numCtx": 2048},
              "storeType": "sqlite"}
    r = client.post("/ragstore/rags", json=config)
    assert r.status_code == 201, r.text
    kb = r.headers["Location"].rsplit("/", 1)[1].split("?")[0]
    assert client.post(f"/ragstore/rags/{kb}/ingest?version=1&documentName=a",
                       content="Refunds take 14 days.", headers={"Content-Type": "text/plain"}).status_code == 202
    verdict = client.get(f"/ragstore/rags/{kb}/verdict").json()
    configuration = next(c for c in verdict["checks"] if c["check"] == "configuration")
    assert verdict["status"] == "warning"
    assert configuration["level"] == "warning" and "logRequests" in configuration["detail"] and "numCtx" in configuration["detail"]
    bad = client.post("/ragstore/rags", json={**config, "embeddingParameters": {"batchSize": "many"}})
    assert bad.status_code == 400 and "$.embeddingParameters.batchSize" in bad.text  # a known one is still checked


def test_our_own_source_types_travel_in_a_note_and_come_back(tmp_path):
    ours = [{"id": "manuals", "name": "Manuals", "type": "folder", "folder": {"path": "manuals"}},
            {"id": "map", "name": "Sitemap", "type": "sitemap", "sitemap": {"url": "https://docs.example.com/sitemap.xml"}}]
    rag = {**EVERY_FIELD, "sources": [*EVERY_FIELD["sources"], *ours]}
    (tmp_path / "manuals").mkdir()
    with Runtime(tmp_path) as runtime:
        first, exported = round_trip(runtime, eddi_export(rag))
        path = f"{WF}/1/{IDS['rag']}.rag.json"
        assert [s["type"] for s in json.loads(exported[path])["sources"]] == ["web", "upload"]  # what EDDI imports
        notes = json.loads(exported[NOTES])
        assert [(e["file"], [s["id"] for s in e["sources"]]) for e in notes["leftOut"]] == [(path, ["manuals", "map"])]
        again = import_agent_export(runtime.resources, zipped(exported), checked=runtime.knowledge_bases.checked)
        kb = next(r.id for r in again.created if r.kind == "rags")
        assert runtime.resources.read("rags", kb)["sources"] == runtime.resources.read("rags", first.created[0].id)["sources"]
        assert NOTES not in "".join(again.kept)


# EDDI 6.6 (issue 67, point 9): an LLM task's tool-call limits and a property instruction's typed values (valueLong,
# valueDouble: labsai/EDDI configs/properties/model/PropertyValues.java), as an EDDI client sends them
LLM_66 = {"tasks": [{"id": "answer", "type": "openai", "actions": ["*"], "maxToolIterations": 10,
                     "maxToolCallsPerIteration": 20, "maxToolCallsPerTurn": 100,
                     "parameters": {"apiKey": "${vault:openaiKey}", "modelName": "gpt-4o-mini"},
                     "postResponse": {"propertyInstructions": [
                         {"name": "bestellnummer", "valueLong": 9007199254740993, "scope": "conversation"},  # past 2^53
                         {"name": "折扣", "valueDouble": 0.125, "scope": "longTerm"},
                         {"name": "ganzzahlig", "valueDouble": 2.0, "scope": "conversation"},  # a double, not 2
                         {"name": "stufe", "valueInt": 3, "valueFloat": 1.5, "valueBoolean": True}]}}]}


def exactly(value):
    """``value`` with each number's type beside it (2.0 and 2 are equal in Python, not in EDDI's Jackson)."""
    if isinstance(value, dict):
        return {k: exactly(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exactly(v) for v in value]
    return (type(value).__name__, value)


def test_eddi_66_task_fields_and_typed_values_round_trip_through_the_llm_store_imports_and_exports(client):
    from tests.support.eddi_rules import llm_dropped, llm_refusals

    assert llm_dropped(LLM_66) == [] and llm_refusals(LLM_66) == []  # EDDI 6.6 models them, as they are
    r = client.post("/llmstore/llms", json=LLM_66)
    assert r.status_code == 201, r.text
    llm = r.headers["Location"].rsplit("/", 1)[1].split("?")[0]
    assert exactly(client.get(f"/llmstore/llms/{llm}").json()) == exactly(LLM_66)
    assert client.put(f"/llmstore/llms/{llm}", params={"version": 1}, json=LLM_66).status_code == 200
    assert exactly(client.get(f"/llmstore/llms/{llm}").json()) == exactly(LLM_66)

    files = eddi_export({"name": "handbook", "embeddingProvider": "ollama"})
    path = f"{WF}/1/{IDS['langchain']}.langchain.json"
    files[path] = jackson(LLM_66)
    _, after = round_trip(client.runtime, files)
    assert exactly(json.loads(after[path])) == exactly(LLM_66) and b'"valueDouble": 2.0' in after[path]
    assert llm_dropped(json.loads(after[path])) == [] and llm_refusals(json.loads(after[path])) == []
