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


def test_list_operators_take_strings_and_see_only_lists():
    acl = {"acl": ["group:finance", "deny:user:bob", 3]}
    assert matches(parse({"acl": {"$containsAny": ["public", "group:finance"]}}), acl)
    assert not matches(parse({"acl": {"$containsAny": ["group:Finance"]}}), acl)  # strings keep their case
    assert not matches(parse({"acl": {"$containsNone": ["deny:user:bob"]}}), acl)
    assert matches(parse({"acl": {"$containsNone": ["deny:user:bob"]}}), {})  # nothing held: none of them
    assert not matches(parse({"acl": {"$containsAny": ["x"]}}), {"acl": "x"})  # a string is no list
    assert not matches(parse({"acl": "group:finance"}), acl) and matches(parse({"acl": {"$ne": "group:finance"}}), acl)
    for wrong, message in (([3], "list of strings"), ("group:finance", "list of strings"), (["x"] * 1001, "at most 1,000")):
        with pytest.raises(FilterError, match=rf"where\.acl\.\$containsAny: .*{message}"):
            parse({"acl": {"$containsAny": wrong}})
