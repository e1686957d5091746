"""EaCO (arXiv 2412.08294): energy-aware co-location of training jobs on shared GPUs
(docs/eaco.md).

Roles: ``predict`` (a group's slowdowns, energy and objective from history or the physics),
``decide`` (the policy: advise and reconcile), ``observe`` (the early-stage observation of
each shared GPU and the moves it calls for), ``settings`` (the ``[eaco]`` site keys),
``shards`` (the shard count of each class when Slurm picks the GPU), ``index`` (candidate
nodes per kind of request, kept between calls), ``mig`` (MIG instances beside time-sliced
sharing, with ``share_modes`` "mig")."""
