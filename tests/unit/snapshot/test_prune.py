"""The restart's clean-up: keys compared by value, and the record that it is owed."""

from pathlib import Path

from migrator.snapshot.prune import canonical_key, is_owed, owe, owed_name
from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import SavepointIdentity, SavepointStore, Side


def test_equal_keys_are_equal_text_whatever_their_order_or_number_spelling():
    assert canonical_key({"pk": {"S": "a"}, "sk": {"N": "10"}}) == canonical_key({"sk": {"N": "1E+1"}, "pk": {"S": "a"}})
    assert canonical_key({"n": {"N": "1.50"}}) == canonical_key({"n": {"N": "1.5"}})
    assert canonical_key({"n": {"N": "-0.001"}}) == canonical_key({"n": {"N": "-1E-3"}})


def test_different_keys_stay_different_to_the_last_of_38_digits():
    a = canonical_key({"n": {"N": "12345678901234567890123456789012345678"}})
    b = canonical_key({"n": {"N": "12345678901234567890123456789012345679"}})
    assert a != b
    assert canonical_key({"k": {"S": "10"}}) != canonical_key({"k": {"N": "10"}})
    assert canonical_key({"k": {"B": "AAE="}}) != canonical_key({"k": {"B": "AAI="}})


def test_the_text_is_sorted_compact_json_of_the_normalized_key_as_work_files_and_resumes_expect():
    """Work files of a resumed validation hold keys written by an earlier run: the spelling must not change."""
    assert canonical_key({"sk": {"N": "1.50"}, "pk": {"S": "東京 \"q\""}, "b": {"B": "AAE="}}) == (
        '{"b":{"B":"AAE="},"pk":{"S":"東京 \\"q\\""},"sk":{"N":"1.5"}}'
    )


def test_owed_until_settled_beside_the_savepoint(tmp_path):
    identity = SavepointIdentity(Side("dynamodb", "http://source", "us-east-1", "src"),
                                 Side("dynamodb", "http://target", "us-east-1", "dst"))
    store = SavepointStore(LocalFolder(str(tmp_path)), {"source": {}, "target": {}}, identity)
    assert not is_owed(store)
    owe(store)
    owe(store)  # a second restart before the clean-up: still one record
    assert is_owed(store)
    assert (Path(store.path).parent / owed_name(store)).exists()
    assert owed_name(store) == Path(store.path).name + ".deletions-owed"
    store.discard()  # dropping the savepoint does not drop what is owed
    assert is_owed(store)
