import pytest

from eddi_rag.stores.filters import And, Compare, FilterError, Or, matches, parse


def test_parse_builds_one_ast():
    assert parse({}) is None and parse(None) is None
    assert parse({"a": 1}) == Compare("a", "$eq", 1)
    assert parse({"a": {"$gt": 1, "$lt": 5}}) == And((Compare("a", "$gt", 1), Compare("a", "$lt", 5)))
    assert parse({"$or": [{"a": 1}, {"b": {"$in": [1, 2]}}]}) == Or((Compare("a", "$eq", 1), Compare("b", "$in", (1, 2))))


@pytest.mark.parametrize(
    "where, part",
    [
        ([1], "where"),
        ({"a": {"$regex": "x"}}, "where.a.$regex"),
        ({"$not": {"a": 1}}, "where.$not"),
        ({"$or": []}, "where.$or"),
        ({"$and": [{"a": 1}, {}]}, r"where.$and[1]"),
        ({"a": {"$in": "abc"}}, "where.a.$in"),
        ({"a": {"$gt": True}}, "where.a.$gt"),
        ({"a": {"$eq": [1]}}, "where.a.$eq"),
        ({"a": {}}, "where.a"),
    ],
)
def test_bad_filters_name_the_offending_part(where, part):
    with pytest.raises(FilterError) as e:
        parse(where)
    assert str(e.value).startswith(part + ":")


def test_missing_fields_match_only_negations():
    meta = {"a": 1}
    assert not matches(parse({"b": 1}), meta)
    assert matches(parse({"b": {"$ne": 1}}), meta)
    assert matches(parse({"b": {"$nin": [1]}}), meta)
    assert not matches(parse({"b": {"$lt": 5}}), meta)
