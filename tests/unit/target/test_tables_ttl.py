"""Which attribute a created target's TTL is enabled on."""

from migrator.target.tables import target_ttl_attribute


def test_the_sources_ttl_attribute_under_its_renamed_name():
    assert target_ttl_attribute("expires", {"expires": "expiresAt"}, skip_ttl_deletions=False) == "expiresAt"
    assert target_ttl_attribute("expires", {"other": "x"}, skip_ttl_deletions=False) == "expires"


def test_none_when_the_source_has_no_ttl_or_skip_ttl_deletions_keeps_what_it_deletes():
    assert target_ttl_attribute(None, {}, skip_ttl_deletions=False) is None
    assert target_ttl_attribute("expires", {"expires": "expiresAt"}, skip_ttl_deletions=True) is None
