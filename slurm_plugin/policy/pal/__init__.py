"""PAL (SC'24): variability-aware placement (docs/pal.md).

Roles: ``settings`` (site keys), ``predict`` (a GPU set's slowdown from the per-GPU profile,
classes by sensitivity), ``decide`` (the policy: advise; reconcile ages queue tiers where a site
sets ``tier_age_s``), ``freshness`` (when a profile row is stale)."""
