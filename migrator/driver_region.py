"""The driver's region, written into the config before any spec reaches an executor.

Executors build their clients from the specs the driver sends. A block that names neither region
nor endpoint would leave each executor to resolve a region from its own environment and profile,
which on a cluster may differ from the driver's: checks in one region, copies in another. This
runs on the driver only (it needs the config's models, which executors never load).
"""

from __future__ import annotations

from dataclasses import replace

import boto3
from pydantic import BaseModel

from migrator.config import LoadedConfig


def with_the_drivers_region(loaded: LoadedConfig) -> LoadedConfig:
    """Every connection block with neither region nor endpoint gets the region botocore resolves on the driver.

    Executors build their clients from the specs the driver sends; a block with no region would
    leave each executor to resolve one from its own environment and profile, which on a cluster
    may differ from the driver's: checks in one region, copies in another. Pinning the driver's
    resolution (AWS_REGION, AWS_DEFAULT_REGION, the profile's region) into the config sends every
    request of a side to one region, as in local mode where both share one environment.
    """
    region = boto3.session.Session().region_name
    if region is None:
        return loaded
    return replace(loaded, config=_pin_region(loaded.config, region))


def _pin_region(model: BaseModel, region: str) -> BaseModel:
    updates = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel) and (pinned := _pin_region(value, region)) is not value:
            updates[name] = pinned
    # A block with an endpoint already names its region (client_spec's default): left as it is.
    connects = callable(getattr(model, "client_spec", None)) and getattr(model, "endpoint", None) is None
    if connects and getattr(model, "region", "") is None:
        updates["region"] = region
    return model.model_copy(update=updates) if updates else model
