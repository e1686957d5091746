"""GreenFlow (TPDS 2025): minimise average JCT under a carbon budget (docs/greenflow.md).

Roles: ``predict`` (a job's JCT, energy and carbon under a choice), ``decide`` (the policy:
advise and reconcile), ``observe`` (carbon spent against the budget, the carbon weight),
``settings`` (site keys), ``place`` (buddy allocation and network packing)."""
