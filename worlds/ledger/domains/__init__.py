"""The six SafeActBench domains: entity kinds, consequential tools and three scenario templates each.

Customer & policy operations (duplicate-charge refund, subscription cancellation, lost-shipment
claim), engineering & infrastructure operations (credential rotation, release deploy, host
drain), legal & finance operations (invoice payment release, contract countersignature,
expense reimbursement), research assistance (dataset access grant, manuscript submission,
compute-job approval), smart-home control (away thermostat, guest door unlock, leak valve
shut-off) and healthcare operations (medication dispense, records release, procedure
scheduling). Every entity, person and organization is fictional. See
:mod:`worlds.ledger.catalog` for the template format.

One module per domain (:mod:`.customer`, :mod:`.engineering`, :mod:`.legal_finance`,
:mod:`.research`, :mod:`.smart_home`, :mod:`.healthcare`); this package lists them in
:data:`DOMAINS_CATALOG` and re-exports each domain's public names.
"""

from __future__ import annotations

from ..catalog import Domain
from .customer import CUSTOMER
from .engineering import ENGINEERING, version
from .healthcare import HEALTHCARE
from .legal_finance import LEGAL_FINANCE
from .research import RESEARCH
from .smart_home import SMART_HOME

__all__ = ["CUSTOMER", "ENGINEERING", "LEGAL_FINANCE", "RESEARCH", "SMART_HOME", "HEALTHCARE",
           "DOMAINS_CATALOG", "version"]

DOMAINS_CATALOG: tuple[Domain, ...] = (CUSTOMER, ENGINEERING, LEGAL_FINANCE, RESEARCH, SMART_HOME, HEALTHCARE)
"""The six domains, in :data:`worlds.ledger.schema.DOMAINS` order."""
