"""A stack of policies: each contributes the stages (kinds of decision) it is best at.

Four kinds of stage, each owning the ``Placement`` fields it may set and the ``Action``s it may
emit:

- sizing: the GPU count, nodes (``-N``) and batch size (elastic, ones, greenflow's count);
  its actions ``resize`` and ``batch``;
- timing: the start, power cap and queue tier (greenflow, carbon-threshold, tiresias, the
  oracle's cap); ``defer``, ``power_cap``;
- sharing: whether the job shares a GPU, how (shards, MPS, MIG) and its memory cap (eaco,
  fifo-packed, gandiva); ``move_exclusive``, ``unpin``;
- placement: the nodes and GPU indexes (pal, packed-sticky, greenflow's buddy allocation and
  network packing, eaco's choice of a GPU to hold).

A stack runs its stages in this order, whatever order the names are written in: sizing first
(the count decides the run time, the power and where the job fits), timing next (a job that
starts later is placed by Slurm when it starts: no stage pins it now), then sharing (a job
that joins a GPU already running another goes where that job is: its node and GPU come with
the share; an elastic job, resized by requeue onto whole GPUs, shares none), placement last (the nodes and GPUs of every job that shares no busy GPU). Each
stage sees the request as the stages before it left it (the count sizing chose is the count
timing prices) and the cluster they leave it (a sharing stage after nothing else sees all
nodes; a placement stage after a share that pinned a node is skipped). A stage sets only the
fields its kind owns: what a policy decides for other kinds is dropped, and said in ``why``
only by its own stage's lines.

Which policy runs a kind (``plan``): the named policy offering it that offers the fewest kinds
(pal, placement only, places beside greenflow's three kinds; elastic sizes beside greenflow).
Two named policies offering a kind with the same number of kinds (pal and packed-sticky) is an
error: the site must say which. A policy left with no kind is an error too.

``reconcile``: each stage policy's actions, those of the kinds it runs (``observe`` and
``note`` always pass), then at most one mutating action per job per pass, by stage order.
A stage that raises leaves the draft as the stages before it decided, with one ``why`` line
that says so; the submission goes in.
"""

from __future__ import annotations

from types import MappingProxyType

from ..model import Action, Cluster, JobRequest, Placement
from ..record import replace
from .base import Context

KINDS = ("sizing", "timing", "sharing", "placement")      # the order a stack runs them
FIELDS = {
    "sizing": ("gpus", "num_nodes", "batch_size"),
    "timing": ("begin_s", "power_cap_w", "nice"),
    "sharing": ("share_mode", "shards", "gpu_memory_cap_mib", "mig_profile"),
    "placement": ("nodes", "gpu_indexes"),
}
ACTION_KIND = {"resize": "sizing", "batch": "sizing", "defer": "timing",
               "power_cap": "timing", "move_exclusive": "sharing", "unpin": "sharing"}
PASS_ACTIONS = ("observe", "note")
STACK_SEPARATOR = "+"


class StackError(ValueError):
    """A stack that cannot run: which names, and why."""


def split(name: str) -> tuple[str, ...]:
    """The policy names of a stack name (``pal+eaco``); one name for a plain policy."""
    return tuple(n.strip() for n in name.split(STACK_SEPARATOR))


def plan(names: tuple[str, ...], kinds_of: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """kind -> the policy of ``names`` that runs it (the module doc); ``StackError`` naming
    the policies when two tie for a kind, one is named twice or one is left with none."""
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise StackError(f"{', '.join(twice)} named twice")
    out: dict[str, str] = {}
    for kind in KINDS:
        offers = sorted((len(kinds_of[n]), n) for n in names if kind in kinds_of[n])
        if not offers:
            continue
        if len(offers) > 1 and offers[0][0] == offers[1][0]:
            tied = [n for n in names if (len(kinds_of[n]), n) in offers
                    and len(kinds_of[n]) == offers[0][0]]
            raise StackError(f"{' and '.join(tied)} both offer the {kind} stage: name one "
                             "of them")
        out[kind] = offers[0][1]
    idle = [n for n in names if n not in out.values()]
    if idle:
        raise StackError(f"{', '.join(idle)} would run no stage (its kinds: "
                         + "; ".join(f"{n}: {', '.join(kinds_of[n]) or 'none'}" for n in idle)
                         + "), each taken by another named policy")
    return out


def _narrowed(cluster: Cluster, nodes: tuple[str, ...]) -> Cluster:
    return replace(cluster, nodes=tuple(n for n in cluster.nodes if n.name in nodes))


def _joins_busy_gpu(p: Placement, cluster: Cluster) -> bool:
    """Whether ``p`` pins GPUs that hold jobs now (a share with jobs already there)."""
    if not p.nodes or not p.gpu_indexes or p.share_mode == "exclusive":
        return False
    name = p.nodes[0]
    node = next((n for n in cluster.nodes if n.name == name), None)
    return node is not None and any(g.index in p.gpu_indexes and not g.is_free
                                    for g in node.gpus)


class Stack:
    """The policy a stack name (``pal+eaco+greenflow+elastic``) or ``policy.stages`` gives."""

    def __init__(self, name: str, policies: dict[str, object], kinds: dict[str, str],
                 offers: dict[str, tuple[str, ...]]) -> None:
        self.name = name
        self.policies = policies              # name -> policy
        self.kinds = kinds                    # kind -> policy name (``plan``)
        self.offers = offers                  # name -> the kinds it offers
        self._merged: tuple = (None, {})      # (the caller's settings, each stage's own)
        self.stage_failures = 0     # advise calls where a stage raised (the simulator counts)
        self._order = [(k, kinds[k]) for k in KINDS if k in kinds]     # ``stages()``
        # each stage policy with the kinds it runs, in stage order (``reconcile``)
        self._runs = {name: [k for k, n in self._order if n == name]
                      for name in dict.fromkeys(kinds.values())}
        self._kinds_of = {name: tuple(self._runs.get(name, ())) for name in policies}
        stage = [policies[n] for n in dict.fromkeys(kinds.values())]
        self.reads_carbon = any(getattr(p, "reads_carbon", False) for p in stage)
        self.reads_limit_use = any(getattr(p, "reads_limit_use", False) for p in stage)
        self.reads_budget = any(getattr(p, "reads_budget", False) for p in stage)
        self.slurm_settings = {k: v for p in stage
                               for k, v in getattr(p, "slurm_settings", {}).items()}

    def stages(self) -> list[tuple[str, str]]:
        """(kind, policy name) in the order they run."""
        return list(self._order)

    def _ctx(self, name: str, ctx: Context) -> Context:
        """``ctx`` with the stage policy's own settings, over what the caller added beside
        them (the simulator's ``profile_factors``), and the kinds it runs (``stage_kinds``)."""
        if self._merged[0] is not ctx.settings:     # one mapping per stage while the
            per = ctx.settings.get("stage_settings") or {}     # caller's is the same object:
            shared = {k: v for k, v in ctx.settings.items() if k != "stage_settings"}
            self._merged = (ctx.settings, {n: MappingProxyType({**shared, **per.get(n, {})})
                                           for n in self.policies})   # policies cache on it
        return replace(ctx, settings=self._merged[1][name], stage_kinds=self._kinds_of[name])

    def prefetch(self, request: JobRequest, settings) -> tuple[str, ...]:
        per = settings.get("stage_settings") or {}
        wanted: set[str] = set()
        for _, name in self.stages():
            p = self.policies[name]
            wanted |= set(p.prefetch(request, per.get(name, {})) if hasattr(p, "prefetch")
                          else ("cluster", "readings"))
        return tuple(sorted(wanted))

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        draft = {"policy": self.name, "gpus": request.gpus}   # the Placement's fields so far
        why: list[str] = []
        predicted: dict[str, float] = {}
        req, cluster = request, ctx.cluster
        elastic = request.min_gpus is not None and request.max_gpus is not None and \
            request.max_gpus > request.min_gpus
        for kind, name in self._order:
            begin_s = draft.get("begin_s")
            if kind in ("sharing", "placement") and begin_s is not None and begin_s > ctx.now_s:
                why.append(f"{kind} ({name}): skipped: the job starts later, where Slurm "
                           "finds room then")
                continue
            if kind == "sharing" and elastic:
                why.append(f"sharing ({name}): skipped: an elastic job ({request.min_gpus}-"
                           f"{request.max_gpus} GPUs) is resized onto whole GPUs")
                continue
            if kind == "placement" and draft.get("nodes"):
                why.append(f"placement ({name}): skipped: the job shares a GPU with jobs on "
                           f"{','.join(draft['nodes'])}")
                continue
            try:
                got = self.policies[name].advise(req, self._ctx(name, ctx))
            except Exception as exc:            # one stage's fault never fails the job
                self.stage_failures += 1
                why.append(f"{kind} ({name}): failed ({type(exc).__name__}: {exc}); the job "
                           "goes in as the stages before it decided")
                break
            for f in FIELDS[kind]:
                draft[f] = getattr(got, f)
            if kind == "sharing" and _joins_busy_gpu(got, cluster):
                draft["nodes"], draft["gpu_indexes"] = got.nodes, got.gpu_indexes
            why += [f"{kind} ({name}): {w}" for w in got.why]
            predicted.update({f"{name}:{k}": v for k, v in got.predicted.items()})
            if kind == "sizing":
                req = replace(req, gpus=draft["gpus"],
                              num_nodes=draft["num_nodes"] or req.num_nodes, min_gpus=None,
                              max_gpus=None)
        return Placement(**draft, why=tuple(why), predicted=predicted)

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        """Each stage policy's actions but those of a kind it offers and another policy runs;
        then at most one mutating action per job, by stage order (an action of a kind the
        policy does not offer, such as ones' hold by ``defer``, ranks as its first stage)."""
        keep: list[tuple[int, Action]] = []
        for name, kinds in self._runs.items():
            for a in self.policies[name].reconcile(self._ctx(name, ctx)):
                kind = ACTION_KIND.get(a.kind, kinds[0])
                if kind not in self.offers[name]:
                    kind = kinds[0]
                if a.kind in PASS_ACTIONS:
                    keep.append((-1, a))
                elif kind in kinds:
                    keep.append((KINDS.index(kind), a))
        out, acted = [], set()
        for rank, a in sorted(keep, key=lambda x: x[0]):
            if rank >= 0:
                if a.job_id in acted:
                    continue
                acted.add(a.job_id)
            out.append(a)
        return tuple(out)
